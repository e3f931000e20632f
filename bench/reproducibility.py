"""Does a comparison hold the next time it is run? The default `memsleuth compare`, twice.

Prints, for the two runs: whether each working set's ranking of allocators matched, the largest
disagreement between the two runs' paired ratios to the fastest (target <= 3%), and how long
each run took.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memsleuth.analysis import analyse
from memsleuth.store import Store


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
        rank = lambda g: [c.cell.allocator["name"] for c in sorted(  # noqa: E731
            (c for c in g.cells if c.estimate), key=lambda c: -c.estimate.median)]
        r1, r2 = rank(g1), rank(g2)
        print(f"  {label:<9} ranking {'matched' if r1 == r2 else 'DIFFERED'}: {' > '.join(r1)}"
              + ("" if r1 == r2 else f"  vs  {' > '.join(r2)}"))
        # Ratio to the fastest, each run against its own fastest; compare as time ratios.
        for c1 in g1.cells:
            c2 = next((c for c in g2.cells if c.cell.allocator["name"] == c1.cell.allocator["name"]), None)
            if not (c1.estimate and c2 and c2.estimate):
                continue
            best1 = max(c.estimate.median for c in g1.cells if c.estimate)
            best2 = max(c.estimate.median for c in g2.cells if c.estimate)
            x1, x2 = best1 / c1.estimate.median, best2 / c2.estimate.median
            dis = abs(x1 / x2 - 1)
            if dis > worst[0]:
                worst = (dis, f"{label} {c1.cell.allocator['name']}: {x1:.3f}x vs {x2:.3f}x")
    print(f"  largest disagreement of ratio-to-fastest between the runs: {worst[0]:.1%} ({worst[1]}); "
          "target <= 3%")
    print(f"  time per run: {took[0]:.1f} s and {took[1]:.1f} s")


if __name__ == "__main__":
    run()
