"""Two stored runs compared cell by cell: the regression gate for CI (`memsleuth diff`).

Cells are matched by allocator name and parameters (for a command: by allocator and command).
Separate runs cannot be paired by round, so each change is the ratio of the two medians with a
seeded bootstrap CI. A change is called only when its whole CI lies beyond the threshold, so the
same setup run twice reads "no difference resolved" on a noisy machine, and the gate fails only
on a regression the data resolves beyond the threshold.
"""
from __future__ import annotations

from dataclasses import dataclass

from memsleuth import stats
from memsleuth.analysis import CellSummary, analyse
from memsleuth.store import StoredRun


@dataclass
class Change:
    key: str
    before: CellSummary | None
    after: CellSummary | None
    slowdown: stats.Estimate | None      # time_after / time_before (> 1: B is slower)
    verdict: stats.Verdict

    @property
    def regression(self) -> bool:
        return self.verdict.kind == "slower"


def _key(c: CellSummary) -> str:
    cell = c.cell
    if cell.params:
        return f"{cell.allocator.name} [" + ", ".join(f"{k}={v}" for k, v in sorted(cell.params.items())) + "]"
    return f"{cell.allocator.name} [{' '.join(cell.command)}]"


def _times(c: CellSummary) -> list[float]:
    """Per-run cost in seconds per op (or per run): lower is better for both metrics."""
    values = [s.metric(c.metric) for _, s in c.ok_samples]
    return [1.0 / v for v in values] if c.higher_is_better else values


def compare_runs(a: StoredRun, b: StoredRun, threshold: float) -> list[Change]:
    before = {_key(c): c for g in analyse(a) for c in g.cells}
    after = {_key(c): c for g in analyse(b) for c in g.cells}
    changes = []
    for key in list(before) + [k for k in after if k not in before]:
        x, y = before.get(key), after.get(key)
        if x is None or y is None:
            changes.append(Change(key, x, y, None, stats.Verdict("unresolved", "only in run " + ("B" if x is None else "A"))))
            continue
        tx, ty = _times(x), _times(y)
        if not tx or not ty:
            state = f"A {x.label}, B {y.label}"
            changes.append(Change(key, x, y, None, stats.Verdict("unresolved", f"no ok runs to compare ({state})")))
            continue
        if x.metric != y.metric:
            changes.append(Change(key, x, y, None, stats.Verdict("unresolved", "measured differently in A and B")))
            continue
        slow = stats.bootstrap_ratio_of_medians(ty, tx)
        changes.append(Change(key, x, y, slow, stats.verdict(slow, threshold, subject="B")))
    return changes
