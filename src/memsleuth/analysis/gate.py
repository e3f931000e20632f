"""The regression gate's checks: time from A/B rounds paired in one session, and counts that load
does not move (page faults, each memory syscall, resident memory), from any two sets of runs.

Time. A baseline and a candidate run alternately in one session, so whatever the machine does
hits both alike; each round gives one ratio candidate/baseline, and the estimate is the median
of those ratios with its distribution-free 95% CI (stats.paired_ratio). The default time is CPU
time (user + system), not wall time: with other work on the machine a run waits for a core,
and that wait lands in wall time but not in CPU time (bench/gate_power.py measures both on a
loaded machine and prints their CI widths and error rates side by side). `--time wall` is for
programs whose time is waiting (I/O, sleeping on locks), which CPU time does not see.

A time verdict is three-way against the threshold t:
  regression   the whole CI lies above 1 + t
  pass         the whole CI lies below 1 + t (no slowdown as large as t; "faster" when below 1)
  unresolved   the CI straddles 1 + t: the data cannot say, and the gate says so
The session adds rounds until the verdict is not "unresolved" or the round cap is reached
(`resolved`), so a quiet machine stops early and a noisy one runs longer.

Counts. A count is deterministic for most programs and drifts a little for others (address-space
layout, thread timing). A count change is called only when it is beyond both the threshold and
the spread of the runs themselves: every candidate run above every baseline run (or below, for
an improvement), which with five runs each has a chance of 1 in 252 for two equal distributions.
Changes smaller than a floor in absolute terms (a syscall's mechanism floor, events.MECHANISM_FLOORS,
else 100 calls; 256 faults = 1 MiB; 1 MiB of memory) are never called: they are housekeeping,
whatever their ratio. futex is shown and never gated:
how often threads wait on each other depends on the machine's load.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable

from memsleuth import stats
from memsleuth.events import MECHANISM_FLOORS
from memsleuth.records.documents import with_defaults
from memsleuth.records.evidence import Sample

DEFAULT_TIME_THRESHOLD = 0.05
DEFAULT_COUNT_THRESHOLD = 0.10
# Fewer runs a side than this and a count change is never called (1 / C(10, 5) = 1/252).
MIN_COUNT_RUNS = 5
TIME_ESTIMATORS = ("cpu", "wall")

# Verdict kinds, worst first: the gate's exit code follows the worst one (commands/gate.py).
REGRESSION, UNRESOLVED, PASS, IMPROVEMENT = "regression", "unresolved", "pass", "improvement"


@dataclass(frozen=True)
class CountMetric:
    """One count the gate reads from every run: its name, how to read it, the smallest absolute
    change that can be called, and whether it gates (futex: shown only)."""
    name: str
    unit: str                                   # "calls", "faults", "bytes"
    floor: float
    read: Callable[[Sample], float | None]
    gates: bool = True
    syscall: str | None = None      # a call counted by name: where the timed runs counted none, each
                                    # counting run's count once (Sample.counted_in), not its copies

    def values(self, samples: list[Sample]) -> list[float]:
        """The count in each ok run that has it: one value per run that counted it."""
        ok = [s for s in samples if s.ok]
        borrowed = next((s.counted_in for s in ok if s.syscalls_from), None)
        if self.syscall is not None and borrowed is not None:
            return [float(c[self.syscall]) for c in borrowed if self.syscall in c]
        return [v for s in ok if (v := self.read(s)) is not None]


MIB = 1 << 20
# The smallest change in a syscall's count that is called: the mechanism's own floor where it has
# one (events.MECHANISM_FLOORS: below it the calls are housekeeping), else this.
CALL_FLOOR = 100
GATED_SYSCALLS = ("mmap", "munmap", "madvise", "brk", "mprotect", "mremap")
SHOWN_SYSCALLS = ("futex",)


def _mean_rss(s: Sample) -> float | None:
    kb = s.mean_rss_kb
    return kb * 1024 if kb is not None else None


def _released(s: Sample) -> float | None:
    from memsleuth.analysis.cost import released_in      # (the findings package: not at CLI start)
    return released_in(s.syscall_args)


COUNTS: tuple[CountMetric, ...] = (
    CountMetric("page faults", "faults", 256, lambda s: float(s.minflt + s.majflt)),
    CountMetric("peak RSS", "bytes", MIB, lambda s: float(s.maxrss_kb) * 1024 if s.maxrss_kb else None),
    CountMetric("time-averaged RSS", "bytes", MIB, _mean_rss),
    *(CountMetric(f"{name} calls", "calls", MECHANISM_FLOORS.get(name, CALL_FLOOR),
                  (lambda n: lambda s: float(s.syscalls[n]) if n in s.syscalls else None)(name), syscall=name)
      for name in GATED_SYSCALLS),
    *(CountMetric(f"{name} calls", "calls", CALL_FLOOR, (lambda n: lambda s: float(s.syscalls[n]) if n in s.syscalls
                                                         else None)(name), gates=False, syscall=name)
      for name in SHOWN_SYSCALLS),
    CountMetric("bytes released (munmap, brk, madvise)", "bytes", MIB, _released),
)


@dataclass(frozen=True)
class Check:
    """One gated quantity of one cell: what was compared, the numbers, and the verdict."""
    cell: str
    metric: str                          # "time (cpu)", "page faults", "madvise calls", ...
    kind: str                            # "time" or "count"
    verdict: str                         # REGRESSION, UNRESOLVED, PASS, IMPROVEMENT
    baseline: float | None               # the median of the baseline's runs
    candidate: float | None
    change: stats.Estimate | None        # candidate / baseline (time: paired, with its CI)
    threshold: float
    text: str                            # why, in words with the numbers
    unit: str = ""
    gates: bool = True                   # False: shown, never decides the exit code
    baseline_range: tuple[float, float] | None = None
    candidate_range: tuple[float, float] | None = None
    n: tuple[int, int] = (0, 0)


# ---- time ----------------------------------------------------------------------------------

def run_time(sample: Sample, estimator: str) -> float | None:
    """One run's time: per op of region `main` when the program has one (a built-in workload),
    else the whole process's; CPU (user + system) or wall."""
    main = sample.main
    if main is not None and main.ops:
        t = (main.user_ns + main.sys_ns) if estimator == "cpu" else main.wall_ns
        return t / 1e9 / main.ops if t else None
    t = (sample.user_ns + sample.sys_ns) if estimator == "cpu" else sample.wall_ns
    return t / 1e9 if t else None


def times_by_round(samples: dict[int, Sample], estimator: str) -> dict[int, float]:
    out = {}
    for r, s in samples.items():
        if s.ok and (t := run_time(s, estimator)):
            out[r] = t
    return out


def time_verdict(change: stats.Estimate | None, threshold: float) -> tuple[str, str]:
    if change is None:
        return UNRESOLVED, "no round in which both ran"
    if change.low is None or change.high is None:
        return UNRESOLVED, f"unresolved: {change.n} paired rounds are too few for a 95% CI (6 at least)"
    ci = f"[{(change.low - 1) * 100:+.1f}%, {(change.high - 1) * 100:+.1f}%]"
    if change.low > 1 + threshold:
        return REGRESSION, f"{(change.median - 1) * 100:+.1f}% {ci}: the whole CI is above +{threshold:.0%}"
    if change.high < 1:
        return IMPROVEMENT, f"{(change.median - 1) * 100:+.1f}% {ci}: faster, the whole CI is below 0%"
    if change.high < 1 + threshold:
        return PASS, f"{(change.median - 1) * 100:+.1f}% {ci}: no slowdown as large as {threshold:.0%} (the whole CI " \
                     "is below it)"
    width = (change.high - change.low) / 2 * 100
    return UNRESOLVED, (f"unresolved: {(change.median - 1) * 100:+.1f}% {ci}, CI ±{width:.1f}% straddles "
                        f"+{threshold:.0%}; more rounds, a quieter machine or a larger threshold would resolve it")


def paired_time(baseline: dict[int, Sample], candidate: dict[int, Sample], estimator: str) -> stats.Estimate | None:
    return stats.paired_by_round(times_by_round(candidate, estimator), times_by_round(baseline, estimator))


def time_check(cell: str, baseline: dict[int, Sample], candidate: dict[int, Sample], estimator: str,
               threshold: float) -> Check:
    change = paired_time(baseline, candidate, estimator)
    verdict, text = time_verdict(change, threshold)
    tb, tc = times_by_round(baseline, estimator), times_by_round(candidate, estimator)
    return Check(cell, f"time ({estimator})", "time", verdict, stats.median_of(tb.values()),
                 stats.median_of(tc.values()), change, threshold, text, unit="s",
                 n=(len(tb), len(tc)))


def resolved(baseline: dict[int, Sample], candidate: dict[int, Sample], estimator: str, threshold: float) -> bool:
    """Whether the paired time verdict is settled (the session can stop adding rounds)."""
    return time_verdict(paired_time(baseline, candidate, estimator), threshold)[0] != UNRESOLVED


# ---- counts --------------------------------------------------------------------------------

def _fmt(v: float, unit: str) -> str:
    if unit == "bytes":
        return f"{v / MIB:,.1f} MiB"
    return f"{v:,.0f}"


def count_check(cell: str, metric: CountMetric, a: list[float], b: list[float], threshold: float,
                sides: tuple[str, str] = ("the baseline", "the candidate"), runs: str = "runs") -> Check | None:
    """A count compared across two sets of runs; None when neither side has it."""
    if not any(a) and not any(b):
        return None                      # never happened on either side: nothing to compare
    common = dict(cell=cell, metric=metric.name, kind="count", threshold=threshold, unit=metric.unit,
                  gates=metric.gates, n=(len(a), len(b)))
    if not a or not b:
        side = sides[0] if not a else sides[1]
        return Check(verdict=UNRESOLVED, baseline=None, candidate=None, change=None,
                     text=f"not measured in {side}'s runs", **common)
    ma, mb = statistics.median(a), statistics.median(b)
    ratio = mb / ma if ma else (float("inf") if mb else 1.0)
    change = stats.Estimate(ratio, None, None, None, min(len(a), len(b)))
    ranges = dict(baseline_range=(min(a), max(a)), candidate_range=(min(b), max(b)))
    shown = f"{_fmt(ma, metric.unit)} -> {_fmt(mb, metric.unit)}"
    pct = "new" if ma == 0 and mb else f"{(ratio - 1) * 100:+.0f}%"
    spread = (f"{sides[0]} {_fmt(min(a), metric.unit)}..{_fmt(max(a), metric.unit)}, {sides[1]} "
              f"{_fmt(min(b), metric.unit)}..{_fmt(max(b), metric.unit)}")
    if abs(mb - ma) < metric.floor:
        return Check(verdict=PASS, baseline=ma, candidate=mb, change=change, **ranges,
                     text=f"{shown}: a change under {_fmt(metric.floor, metric.unit)}"
                          f"{'' if metric.unit == 'bytes' else ' ' + metric.unit} is never called",
                     **common)
    if abs(ratio - 1) <= threshold:
        return Check(verdict=PASS, baseline=ma, candidate=mb, change=change, **ranges,
                     text=f"{shown} ({pct}): within ±{threshold:.0%}", **common)
    if min(len(a), len(b)) < MIN_COUNT_RUNS:
        return Check(verdict=UNRESOLVED, baseline=ma, candidate=mb, change=change, **ranges,
                     text=f"{shown} ({pct}), but fewer than {MIN_COUNT_RUNS} {runs} a side: not called", **common)
    if min(b) > max(a):
        return Check(verdict=REGRESSION, baseline=ma, candidate=mb, change=change, **ranges,
                     text=f"{shown} ({pct}): every run of {sides[1]} above every run of {sides[0]} ({spread})", **common)
    if max(b) < min(a):
        return Check(verdict=IMPROVEMENT, baseline=ma, candidate=mb, change=change, **ranges,
                     text=f"{shown} ({pct}): every run of {sides[1]} below every run of {sides[0]} ({spread})", **common)
    return Check(verdict=UNRESOLVED, baseline=ma, candidate=mb, change=change, **ranges,
                 text=f"{shown} ({pct}), but the runs overlap ({spread}): not beyond their spread", **common)


def count_checks(cell: str, baseline: list[Sample], candidate: list[Sample], threshold: float,
                 sides: tuple[str, str] = ("the baseline", "the candidate")) -> list[Check]:
    out = []
    for m in COUNTS:
        a, b = m.values(baseline), m.values(candidate)
        warm = m.syscall is not None and any(s.syscalls_from for s in baseline + candidate if s.ok)
        c = count_check(cell, m, a, b, threshold, sides,
                        "warm-ups that counted the calls" if warm else "runs")
        if c is not None:
            out.append(c)
    return out


def outcome(checks: list[Check]) -> str:
    """The gate's verdict over its gating checks: regression, unresolved, or pass."""
    gating = [c for c in checks if c.gates]
    if any(c.verdict == REGRESSION for c in gating):
        return REGRESSION
    if any(c.verdict == UNRESOLVED for c in gating):
        return UNRESOLVED
    return PASS


@dataclass(frozen=True)
class Result:
    """A gate session read back from the store: every check, and the verdict over them."""
    cell: str                            # what was compared, for people: "glibc+baseline vs glibc+candidate"
    checks: list[Check]
    verdict: str
    rounds: int                          # paired rounds measured
    estimator: str
    threshold: float
    count_threshold: float


def settings(run) -> tuple[str, float, float]:
    """A stored gate or --try run's settings (RunSpec.gate): the time estimator, the time and the
    count thresholds, each its default where the run has none; ValueError where one is not a number."""
    d = with_defaults(run.spec.gate or {}, {"time": "cpu", "threshold": DEFAULT_TIME_THRESHOLD,
                                             "count_threshold": DEFAULT_COUNT_THRESHOLD})
    return str(d["time"]), float(d["threshold"]), float(d["count_threshold"])


def evaluate(run, estimator: str, threshold: float, count_threshold: float) -> Result:
    """The checks of a stored gate run (its two cells: baseline first, candidate second)."""
    if len(run.cells) != 2:
        raise ValueError(f"a gate run has two cells, run {run.id} has {len(run.cells)}")
    base, cand = ({r: s for r, s in c.measured()} for c in run.cells)
    name = f"{run.cells[0].contender} vs {run.cells[1].contender}"
    checks = [time_check(name, base, cand, estimator, threshold)]
    checks += count_checks(name, list(base.values()), list(cand.values()), count_threshold)
    rounds = len(set(times_by_round(base, estimator)) & set(times_by_round(cand, estimator)))
    return Result(name, checks, outcome(checks), rounds, estimator,
                  threshold, count_threshold)
