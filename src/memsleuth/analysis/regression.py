"""Two stored runs compared cell by cell: the regression gate for CI (`memsleuth diff`).

Cells are matched by allocator name and parameters (for a command: by allocator and command).
Separate runs cannot be paired by round, so each change is the ratio of the two medians with a
seeded bootstrap CI. A change is called only when its whole CI lies beyond the threshold, so the
same setup run twice reads "no difference resolved" on a noisy machine, and the gate fails only
on a regression the data resolves beyond the threshold.

A shift of the whole machine between two runs (another tenant, a host frequency change) moves every
cell of B alike, and a ratio of two runs' medians cannot tell it from a regression. So each run
measures a fixed reference cell once per round (plan.reference_cell), and when both runs have it,
each round's cost is divided by that round's reference cost before the runs are compared: the
normalised change, which decides the verdict. The raw change is shown beside it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from memsleuth.analysis import gate as gating
from memsleuth import stats
from memsleuth.analysis.summary import CellSummary, analyse
from memsleuth.records.stored import StoredRun


@dataclass
class Change:
    key: str
    before: CellSummary | None
    after: CellSummary | None
    slowdown: stats.Estimate | None      # time_after / time_before (> 1: B is slower), raw
    verdict: stats.Verdict               # from the normalised change when both runs have a reference
    normalised: stats.Estimate | None = None   # the same, each round divided by its reference cost
    # Page faults, memory syscalls and resident memory of A's runs against B's (gate.count_checks):
    # counts that load does not move, so they gate separate runs even where time cannot.
    counts: list[gating.Check] = field(default_factory=list)

    @property
    def time_regression(self) -> bool:
        return self.verdict.kind == "slower"

    @property
    def count_regressions(self) -> list[gating.Check]:
        return [c for c in self.counts if c.gates and c.verdict == gating.REGRESSION]

    @property
    def regression(self) -> bool:
        return self.time_regression or bool(self.count_regressions)


def cell_key(c: CellSummary) -> str:
    cell = c.cell
    if cell.params:
        return f"{cell.allocator.name} [" + ", ".join(f"{k}={v}" for k, v in sorted(cell.params.items())) + "]"
    return f"{cell.allocator.name} [{' '.join(cell.command)}]"


def costs(c: CellSummary) -> list[float]:
    """Per-run cost in seconds per op (or per run): lower is better for both metrics."""
    return list(_times_by_round(c).values())


def _times_by_round(c: CellSummary) -> dict[int, float]:
    values = {r: s.metric(c.metric) for r, s in c.ok_samples}
    return {r: 1.0 / v for r, v in values.items()} if c.higher_is_better else values


def reference_cost(run: StoredRun) -> dict[int, float]:
    """Per round, the reference cell's seconds per op; empty when the run has none."""
    if run.reference is None:
        return {}
    return {r: 1.0 / s.ops_per_s for r, s in run.reference.measured() if s.ok and s.ops_per_s}


def normalised_costs(c: CellSummary, reference: dict[int, float]) -> list[float]:
    """Each round's cost in units of that round's reference cost (rounds without one are left out)."""
    return [t / reference[r] for r, t in _times_by_round(c).items() if r in reference]


def reference_change(a: StoredRun, b: StoredRun) -> stats.Estimate | None:
    """How much slower the machine ran the reference in B than in A (> 1: slower)."""
    ra, rb = reference_cost(a), reference_cost(b)
    if not ra or not rb:
        return None
    return stats.bootstrap_ratio_of_medians(list(rb.values()), list(ra.values()))


def time_verdict(change: stats.Estimate, threshold: float) -> stats.Verdict:
    """stats.verdict, with its "unresolved" told apart: a CI wholly inside ±threshold (no change as
    large as the threshold) from one that straddles it (the data cannot say)."""
    v = stats.verdict(change, threshold, subject="B")
    if v.kind != "unresolved" or change.low is None or change.high is None:
        return v
    ci = f"[{(change.low - 1) * 100:+.1f}%, {(change.high - 1) * 100:+.1f}%]"
    if 1 / (1 + threshold) <= change.low and change.high <= 1 + threshold:
        return stats.Verdict("unresolved", f"no change beyond ±{threshold:.0%}: the whole CI {ci} is inside")
    return stats.Verdict("unresolved", f"unresolved: the CI {ci} reaches beyond ±{threshold:.0%}; more rounds or "
                                       "in-session A/B (memsleuth gate) would resolve it")


def compare_runs(a: StoredRun, b: StoredRun, threshold: float,
                 count_threshold: float = gating.DEFAULT_COUNT_THRESHOLD) -> list[Change]:
    before = {cell_key(c): c for g in analyse(a, cpu_time=False) for c in g.cells}
    after = {cell_key(c): c for g in analyse(b, cpu_time=False) for c in g.cells}
    ref_a, ref_b = reference_cost(a), reference_cost(b)
    changes = []
    for key in list(before) + [k for k in after if k not in before]:
        x, y = before.get(key), after.get(key)
        if x is None or y is None:
            only = "only in run " + ("B" if x is None else "A")
            changes.append(Change(key, x, y, None, stats.Verdict("unresolved", only)))
            continue
        counts = gating.count_checks(key, [s for _, s in x.ok_samples], [s for _, s in y.ok_samples], count_threshold,
                                     sides=("A", "B"))
        tx, ty = costs(x), costs(y)
        if not tx or not ty:
            state = f"A {x.label}, B {y.label}"
            changes.append(Change(key, x, y, None, stats.Verdict("unresolved", f"no ok runs to compare ({state})")))
            continue
        if x.metric != y.metric:
            changes.append(Change(key, x, y, None, stats.Verdict("unresolved", "measured differently in A and B"),
                                  counts=counts))
            continue
        slow = stats.bootstrap_ratio_of_medians(ty, tx)
        norm = None
        if ref_a and ref_b:
            nx, ny = normalised_costs(x, ref_a), normalised_costs(y, ref_b)
            if nx and ny:
                norm = stats.bootstrap_ratio_of_medians(ny, nx)
        changes.append(Change(key, x, y, slow, time_verdict(norm or slow, threshold), norm, counts))
    return changes


def junit_checks(changes: list[Change], threshold: float) -> list[gating.Check]:
    """Every check of a diff as gate checks (a cell's time, then its counts), for JUnit XML."""
    out = []
    for ch in changes:
        e = ch.normalised or ch.slowdown
        kind = {"slower": gating.REGRESSION, "faster": gating.IMPROVEMENT}.get(ch.verdict.kind, gating.UNRESOLVED)
        if kind == gating.UNRESOLVED and e is not None and e.high is not None and e.low is not None:
            kind = gating.PASS if e.high < 1 + threshold else gating.UNRESOLVED
        out.append(gating.Check(ch.key, "time", "time", kind, None, None, e, threshold, ch.verdict.text))
        out += ch.counts
    return out


@dataclass
class MachineCell:
    """One cell (allocator and parameters) of one run in `show RUN RUN ...`."""
    key: str
    run: int                               # index into the runs given
    summary: CellSummary | None            # None: the cell is not in that run
    fastest_machine: bool = False
    vs_fastest: stats.Estimate | None = None   # time / the fastest machine's time for this cell
    verdict: stats.Verdict | None = None
    # The same, each run's rounds divided by its own reference cell (when every run has one): the
    # cell against the machine's own baseline loop, so that a shift of a whole machine between
    # runs (drift, a noisy neighbour) cancels.
    vs_fastest_normalised: stats.Estimate | None = None
    verdict_normalised: stats.Verdict | None = None


def same_cells(runs: list[StoredRun], analyses: list) -> bool:
    """Whether every run measured the same kind, program and cells (by cell_key)."""
    return len({(r.kind, r.name, tuple(sorted(cell_key(c) for g in a.groups for c in g.cells)))
                for r, a in zip(runs, analyses)}) == 1


def compare_machines(runs: list[StoredRun], analyses: list) -> tuple[list[str], list[list[MachineCell]]]:
    """The same cells measured in several runs (machines), matched by cell_key: per cell, each run's
    summary and its ratio to the run (machine) that was fastest for that cell. Separate runs, so a
    seeded bootstrap ratio of medians, called beyond the smallest noise threshold of the runs.
    `analyses`: each run's analysis.analyse_run."""
    per_run = [{cell_key(c): c for g in a.groups for c in g.cells} for a in analyses]
    keys = list(dict.fromkeys(k for cells in per_run for k in cells))
    noise = min(r.spec.noise for r in runs)
    refs = [reference_cost(r) for r in runs]
    normalise = all(refs)
    out = []
    for key in keys:
        have = [(i, cells[key]) for i, cells in enumerate(per_run) if key in cells and cells[key].estimate is not None]
        best = None
        if have:
            best = (max if have[0][1].higher_is_better else min)(have, key=lambda t: t[1].estimate.median)
        row = []
        for i, cells in enumerate(per_run):
            c = cells.get(key)
            mc = MachineCell(key, i, c)
            if c is not None and c.estimate is not None and best is not None:
                if best[0] == i:
                    mc.fastest_machine = True
                else:
                    mc.vs_fastest = stats.bootstrap_ratio_of_medians(costs(c), costs(best[1]))
                    mc.verdict = stats.verdict(mc.vs_fastest, noise)
                    if normalise:
                        mine, theirs = normalised_costs(c, refs[i]), normalised_costs(best[1], refs[best[0]])
                        if mine and theirs:
                            mc.vs_fastest_normalised = stats.bootstrap_ratio_of_medians(mine, theirs)
                            mc.verdict_normalised = stats.verdict(mc.vs_fastest_normalised, noise)
            row.append(mc)
        out.append(row)
    return keys, out
