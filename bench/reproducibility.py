"""Does a comparison hold the next time it is run? The default `memsleuth compare`, twice.

Prints, for the two runs: whether each working set's ranking of allocators matched, the largest
disagreement between the two runs' paired slowdown ratios (each allocator against the first run's
fastest, round by round, as the report computes them; target <= 3%), and how long each run took.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memsleuth import stats
from memsleuth.analysis.summary import Group, analyse
from memsleuth.records.store import Store


def paired_estimate(group: Group, name: str, ref: str) -> stats.Estimate | None:
    """Per-round slowdown of `name` against `ref` (ref's ops/s over name's, round by round)."""
    cells = {c.cell.allocator.name: c for c in group.cells}
    if name not in cells or ref not in cells:
        return None
    mine = {r: s.ops_per_s for r, s in cells[name].ok_samples}
    base = {r: s.ops_per_s for r, s in cells[ref].ok_samples}
    rounds = sorted(set(mine) & set(base))
    if not rounds:
        return None
    return stats.paired_ratio([base[r] for r in rounds], [mine[r] for r in rounds])


def paired_vs(group: Group, name: str, ref: str) -> float | None:
    e = paired_estimate(group, name, ref)
    return e.median if e else None


def swaps_unresolved(g1: Group, g2: Group, r1: list[str], r2: list[str]) -> bool:
    """True when every pair ordered differently by the two runs is 'no difference resolved' in a run."""
    for i, a in enumerate(r1):
        for b in r1[i + 1:]:
            if r2.index(a) > r2.index(b):
                tied = any((e := paired_estimate(g, b, a)) and stats.verdict(e).kind == "unresolved"
                           for g in (g1, g2))
                if not tied:
                    return False
    return True


def run() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "repro.db")
        took = []
        for _ in range(2):
            t0 = time.monotonic()
            subprocess.run([sys.executable, "-m", "memsleuth", "compare", "--db", db], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            took.append(time.monotonic() - t0)
        store = Store(db)
        first, second = (analyse(store.load_run(i)) for i in (1, 2))
    print("bench/reproducibility: default `memsleuth compare`, run twice")
    worst = (0.0, "")
    for g1, g2 in zip(first, second):
        label = ", ".join(f"{k}={v}" for k, v in g1.params.items() if k == "ws")
        rank = lambda g: [c.cell.allocator.name for c in sorted(  # noqa: E731
            (c for c in g.cells if c.estimate), key=lambda c: -c.estimate.median)]
        r1, r2 = rank(g1), rank(g2)
        state = ("matched" if r1 == r2 else "matched up to unresolved pairs" if swaps_unresolved(g1, g2, r1, r2)
                 else "DIFFERED")
        print(f"  {label:<9} ranking {state}: {' > '.join(r1)}" + ("" if r1 == r2 else f"  vs  {' > '.join(r2)}"))
        # The reported comparison: per-round paired ratios, each allocator against one reference
        # (run 1's fastest, used in both runs so that the two ratios share a baseline).
        ref = r1[0]
        for name in r1[1:]:
            x1, x2 = paired_vs(g1, name, ref), paired_vs(g2, name, ref)
            if x1 is None or x2 is None:
                continue
            dis = abs(x1 / x2 - 1)
            if dis > worst[0]:
                worst = (dis, f"{label} {name} vs {ref}: {x1:.3f}x vs {x2:.3f}x")
    print(f"  largest disagreement of the paired slowdown ratios between the runs: {worst[0]:.1%} ({worst[1]}); "
          "target <= 3%")
    print(f"  time per run: {took[0]:.1f} s and {took[1]:.1f} s")


if __name__ == "__main__":
    run()
