"""Shared by the benchmarks: interleaved timing of alternatives, reported as paired ratios."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from memsleuth import stats
from memsleuth.measure.runner import TracepointHolder

FIXTURES = Path(os.environ.get("MEMSLEUTH_TEST_FIXTURES", ROOT / "build" / "test"))


def fixture(name: str) -> str:
    p = FIXTURES / name
    if not p.exists():
        sys.exit(f"{p} missing: run `make bench` (it builds the fixtures)")
    return str(p)


def wall(argv: list[str], env: dict | None = None) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **(env or {})},
                   check=True)
    return time.perf_counter() - t0


def interleave(alternatives: dict[str, callable], rounds: int) -> dict[str, list[float]]:
    """Runs each alternative once per round, rotating the order; returns each one's values."""
    names = list(alternatives)
    out: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        k = r % len(names)
        for n in names[k:] + names[:k]:
            out[n].append(alternatives[n]())
    return out


def ratio_line(label: str, num: list[float], den: list[float]) -> str:
    e = stats.paired_ratio(num, den)
    ci = f"[{e.low:.3f}, {e.high:.3f}]" if e.low is not None else "(too few rounds for a CI)"
    return f"{label}: {e.median:.3f}x {ci}  ({(e.median - 1) * 100:+.1f}%)"


# The runner's own holder, so the benchmarks measure what `memsleuth compare` does.
Holder = TracepointHolder
