"""Shared by the benchmarks: interleaved timing of alternatives, reported as paired ratios."""
from __future__ import annotations

import os
import re
import statistics
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


# check --verbose's line on stderr: "memsleuth: where this command's time went: NAME S s; NAME S s"
PHASES_LINE = "memsleuth: where this command's time went: "
PHASE = re.compile(r"([^;]+?) ([0-9]+(?:\.[0-9]+)?) s(?:; |$)")


def check_wall(argv: list[str], db: str, phases: list[dict[str, float]]) -> float:
    """The wall time of one `memsleuth check` of the program, as a user runs it (with --verbose, which
    only adds a line on stderr; --json would add writing its document); the phases it timed (that
    line's), with "start-up and exit": the rest of the wall time, appended to `phases`."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "memsleuth", "check", "--db", db, "--verbose", "--", *argv],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace", check=False)
    took = time.perf_counter() - t0
    timings = {name: float(value) for line in done.stderr.splitlines() if line.startswith(PHASES_LINE)
               for name, value in PHASE.findall(line[len(PHASES_LINE):])}
    if done.returncode != 0 or not timings:      # its time still counts: say so rather than hide it
        last = done.stderr.strip().splitlines()[-1:] or ["(nothing on stderr)"]
        print(f"  check of {argv[0]} exited {done.returncode}, phases {'read' if timings else 'not printed'}: "
              f"{last[0]}", flush=True)
    phases.append({**timings, "start-up and exit": took - sum(timings.values())})
    return took


def check_budget(label: str, argv: list[str], db: str, rounds: int) -> None:
    """The program alone and `memsleuth check` of it, interleaved: the medians against the budget
    2T + 1 s (OVER marks a miss), the paired ratio, and the medians of the phases check timed."""
    phases: list[dict[str, float]] = []
    got = interleave({"program": lambda: wall(argv), "check": lambda: check_wall(argv, db, phases)}, rounds)
    t, c = statistics.median(got["program"]), statistics.median(got["check"])
    budget = 2 * t + 1
    # a check that timed no phase ended before its runs (an error): its time says nothing of the budget
    verdict = "NO RESULT" if any(not p.keys() - {"start-up and exit"} for p in phases) else \
        "within" if c <= budget else "OVER"
    print(f"{label}: program {t:6.2f} s, check {c:6.2f} s, budget {budget:6.2f} s: "
          f"{verdict}; " + ratio_line("check / program", got["check"], got["program"]), flush=True)
    names = list(dict.fromkeys(k for p in phases for k in p))
    print(" " * (len(label) + 2) + ", ".join(f"{k} {statistics.median(p.get(k, 0.0) for p in phases):.2f} s"
                                           for k in names), flush=True)


# The runner's own holder, so the benchmarks measure what `memsleuth compare` does.
Holder = TracepointHolder
