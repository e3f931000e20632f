"""`check --try`: per candidate change, what it did to time, peak RSS and the finding's evidence,
and whether it helps. Built from tried.Trial (which computed every number); words and layout only."""
from __future__ import annotations

import shlex

from memsleuth.analysis import gate as gating, tried
from memsleuth.units import fmt_value
from memsleuth.report.content import Report, Table
from memsleuth.report.wording import change_text, command_text, evidence_moved, trial_why

WORDS = {gating.IMPROVEMENT: "down", gating.REGRESSION: "up", gating.PASS: "same", gating.UNRESOLVED: "overlap"}
# peak RSS beside the time: a change within the counts' threshold is not called up or down (a +8.5% read as
# "up" beside "helps = nothing went up")
RSS_WORDS = {**WORDS, gating.PASS: "not called"}


def _setup(t) -> str:
    parts = []
    if t.allocator:
        parts.append(f"allocator {t.allocator}")
    if t.tunables:
        parts.append("GLIBC_TUNABLES+=" + ":".join(t.tunables))
    parts += [shlex.quote(f"{k}={v}") for k, v in sorted(t.env.items())]
    return "; ".join(parts)


def build(run, trials: list[tried.Trial], check_run: int | None, cells=None) -> Report:
    """The candidates tried against the baseline; `cells` (analysis.RunAnalysis) is the run's cells as
    compare analyses them, kept for the run's JSON."""
    base = run.cells[0]
    rounds = min((c.n[0] for t in trials for c in [t.time]), default=0)
    header = [f"run {run.id} ({run.created_at}, {run.machine.name}); tried after check run {check_run}" if check_run
              else f"run {run.id} ({run.created_at}, {run.machine.name})",
              f"baseline: {base.allocator.name}: {command_text(base.command)}",
              f"the baseline and {len(trials)} candidate(s) alternately, {rounds} rounds after one warm-up each "
              "(rounds are added until every candidate's time against the baseline is resolved at ±5%, or the cap); "
              "time is CPU time paired by round; counts are called beyond ±10% and the runs' spread (docs/ci.md)"]
    rows, failed = [], set()
    for i, t in enumerate(trials):
        ev = "; ".join(f"{c.metric} {fmt_value(c.baseline, c.unit)} -> {fmt_value(c.candidate, c.unit)} ({WORDS[c.verdict]})"
                       for c in t.evidence) or "not measured"
        rows.append([t.candidate.name, t.candidate.finding, _setup(t.candidate), change_text(t.time),
                     f"{change_text(t.peak_rss)} ({RSS_WORDS[t.peak_rss.verdict]})" if t.peak_rss else "-", ev,
                     t.verdict, trial_why(t)])
        if t.verdict == tried.WORSE:
            failed.add((i, 6))
    table = Table("Tried advice: each candidate against the program as it ran",
                  ["candidate", "for finding", "change", "time [95% CI]", "peak RSS", "the finding's evidence",
                   "verdict", "why"], rows,
                  ["Judged on the cost the finding is about (time; peak RSS for memory findings): helps = it went down "
                   "and nothing went up; trade-off = it went down and the other went up; worse = up only; no effect = "
                   "no change beyond the threshold; unresolved = the runs could not say. The evidence counts say what "
                   "happened to the mechanism; a count that fell while the cost did not is not a fix."],
                  align_right={3, 4}, failed=failed)
    answer = []
    for t in trials:
        ev = evidence_moved(t.evidence)
        answer.append(f"{t.candidate.name}: {t.verdict}: {trial_why(t)}" + (f" ({ev})" if ev else ""))
    best = [t for t in trials if t.verdict == tried.HELPS]
    footer = ([f"Measured to help here: {', '.join(t.candidate.name for t in best)}."] if best else
              ["No candidate was measured to help here."])
    return Report(f"memsleuth check --try — {base.command[0] if base.command else run.name}", header, [table],
                  footer, answer=answer, run=run, analysis=cells)

