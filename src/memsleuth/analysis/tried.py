"""Advice, tried (`check --try`): the program as it ran (the baseline) and every candidate change
its findings name (analysis/tries.py), measured alternately in one session and read like the gate
(gate.py): time paired by round with its 95% CI, peak RSS and the finding's own evidence counts
beyond their threshold and the runs' spread.

A candidate is judged on the cost its finding is about: time for the time mechanisms (faults,
system calls, locks), peak RSS for the memory ones (Try.primary), both for a change that addresses
findings of each kind (either going down is the cost going down). The finding's evidence counts
say what happened to the mechanism, and are quoted, but a count that fell while the cost did not
(trim_threshold stops the break's moves, and the same pages are then mapped and faulted by mmap
instead) is not a fix.
  helps       the cost went down (time: the whole CI below 1; RSS: beyond the threshold and the
              runs' spread), and neither time nor peak RSS went up
  trade-off   the cost went down and the other went up
  worse       time or peak RSS went up, and the cost did not go down
  no effect   the cost did not change beyond the threshold (time: the whole CI inside ±5%)
  unresolved  the runs could not say (the time CI reaches beyond ±5% on one side and not the other)
"""
from __future__ import annotations

from dataclasses import dataclass

from memsleuth.analysis import gate as gating
from memsleuth.analysis.tries import Try

HELPS, TRADE_OFF, WORSE, NO_EFFECT, UNRESOLVED = "helps", "trade-off", "worse", "no effect", "unresolved"


@dataclass(frozen=True)
class Judgement:
    """A candidate's verdict on its finding's cost, and the checks that decided it: the cost
    judged (time, or peak RSS for a memory finding) and the costs that went up."""
    verdict: str
    cost: gating.Check
    up: tuple[gating.Check, ...] = ()


@dataclass(frozen=True)
class Trial:
    candidate: Try
    time: gating.Check
    peak_rss: gating.Check | None
    evidence: list[gating.Check]
    judgement: Judgement
    untouched: tuple[str, ...] = ()    # the other findings the change addresses whose evidence did not move

    @property
    def verdict(self) -> str:
        return self.judgement.verdict


def verdict(time: gating.Check, rss: gating.Check | None, evidence: list[gating.Check],
            primary: str = "time") -> Judgement:
    """The verdict on the finding's cost. The evidence counts are quoted by the report, never used
    to judge: a count that fell while the cost did not is not a fix."""
    del evidence
    costs = [c for c in ((time,) if primary == "time" else (rss,) if primary == "peak RSS" else (time, rss))
             if c is not None] or [time]
    down = [c for c in costs if c.verdict == gating.IMPROVEMENT]
    up = tuple(c for c in (time, rss) if c is not None and c.verdict == gating.REGRESSION)
    if down:
        return Judgement(TRADE_OFF if up else HELPS, down[0], up)
    if up:
        return Judgement(WORSE, costs[0], up)
    unsettled = [c for c in costs if not _inside(c)]
    return Judgement(UNRESOLVED, unsettled[0]) if unsettled else Judgement(NO_EFFECT, costs[0])


def _inside(c: gating.Check) -> bool:
    """No change beyond the threshold, on either side."""
    if c.kind == "count":
        return c.verdict == gating.PASS
    e = c.change
    return (e is not None and e.low is not None and e.high is not None
            and 1 / (1 + c.threshold) < e.low and e.high < 1 + c.threshold)


def evaluate(run, estimator: str = "cpu", threshold: float = gating.DEFAULT_TIME_THRESHOLD,
             count_threshold: float = gating.DEFAULT_COUNT_THRESHOLD) -> list[Trial]:
    """The trials of a stored `check --try` session: its first cell is the baseline, each other
    cell a candidate (run.spec.facts["tries"], in cell order)."""
    tries = [Try.from_dict(d) for d in run.facts.tries]
    base_cell, *cells = run.cells
    base = {r: s for r, s in base_cell.measured()}
    out = []
    for t, cell in zip(tries, cells):
        cand = {r: s for r, s in cell.measured()}
        time = gating.time_check(t.name, base, cand, estimator, threshold)
        counts = {c.metric: c for c in gating.count_checks(t.name, list(base.values()), list(cand.values()),
                                                           count_threshold)}
        rss = counts["peak RSS"] if "peak RSS" in counts else None
        evidence = [counts[m] for m in t.evidence if m in counts]
        judged = verdict(time, rss, evidence, t.primary)
        untouched: tuple[str, ...] = ()
        if judged.verdict in (HELPS, TRADE_OFF) and len(t.addresses) > 1:
            # A change that helps through one finding says which other finding it did not touch.
            untouched = tuple(f for f, ms in t.addresses
                              if ms and all(counts[m].verdict == gating.PASS for m in ms if m in counts)
                              and any(m in counts for m in ms))
        out.append(Trial(t, time, rss, evidence, judged, untouched))
    return out


def settled(estimator: str, threshold: float):
    """The session's stop rule: every candidate's time against the baseline resolved."""
    def done(by_round) -> bool:
        base, *cands = by_round
        return all(gating.resolved(base, c, estimator, threshold) for c in cands)
    return done
