"""History with change points (`memsleuth history --trend`): per cell and metric, the value in
every stored run that measured that cell, and the runs where the value stepped.

A step is found by exact optimal partitioning of the series with an L1 cost, as asv's step
detection does: the series is split into segments of constant level so as to minimise the sum,
over segments, of the absolute deviations from each segment's median, plus a penalty for every
split. L1, not squared error: one odd run costs as much inside a segment as in a segment of its
own, so an outlier never reads as two steps. Values are compared as logarithms (a step is a
ratio), in units of the series' own run-to-run noise, estimated robustly from neighbouring runs'
differences (which one step barely moves). The penalty per split is 3 ln n: on simulated series
(tests/unit/test_trend.py) it gave 1% false steps in 30 runs of 5% noise and found 98% of 10%
steps in 2% noise, where 2 ln n gave 4% false steps. A segment is at least MIN_SEGMENT runs long:
a step is two runs agreeing. A step is then reported only when it is as large as the gate would
call (gate.py's thresholds and floors): a resolved 0.3% step in a deterministic count is real,
and no one's concern.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from memsleuth.analysis import gate as gating
from memsleuth import stats

MIN_SEGMENT = 2
# Smallest noise assumed, relative: deterministic counts have none, and a zero sigma would make
# every wobble a step (the magnitude filter then decides).
MIN_SIGMA = 0.001


@dataclass(frozen=True)
class Point:
    run: int
    created_at: str
    value: float
    low: float | None
    high: float | None


@dataclass(frozen=True)
class Step:
    run: int                 # the first run after the step
    before: float            # the level (median of the segment) before and after
    after: float

    @property
    def change(self) -> float:
        return self.after / self.before if self.before else math.inf


@dataclass
class Series:
    cell: str
    metric: str
    unit: str                # "s" (time), "bytes", "faults", "calls"
    points: list[Point]
    steps: list[Step] = field(default_factory=list)
    sigma: float | None = None


PENALTY_PER_LN_N = 3.0


def _l1(y: list[float], i: int, j: int) -> float:
    """Sum of absolute deviations of y[i:j] from its median."""
    seg = y[i:j]
    m = statistics.median(seg)
    return sum(abs(v - m) for v in seg)


def change_points(y: list[float], penalty: float, min_size: int = MIN_SEGMENT) -> list[int]:
    """Indices where a new segment starts, by exact optimal partitioning (O(n^3) with the medians;
    a history is tens of runs)."""
    n = len(y)
    if n < 2 * min_size:
        return []
    best = [0.0] + [math.inf] * n
    last = [0] * (n + 1)
    for j in range(min_size, n + 1):
        for i in ([0] + list(range(min_size, j - min_size + 1))):
            if i and best[i] == math.inf:
                continue
            c = best[i] + _l1(y, i, j) + (penalty if i else 0.0)
            if c < best[j]:
                best[j], last[j] = c, i
    cuts, j = [], n
    while j > 0:
        i = last[j]
        if i:
            cuts.append(i)
        j = i
    return sorted(cuts)


def noise_scale(logs: list[float]) -> float:
    """The run-to-run noise of a series of logarithms as a mean absolute deviation: from the
    median difference of neighbours (1.4826 / sqrt 2 makes it a standard deviation for normal
    noise, 0.798 a mean absolute deviation), never below MIN_SIGMA."""
    if len(logs) < 3:
        return MIN_SIGMA
    diffs = [abs(b - a) for a, b in zip(logs, logs[1:])]
    return max(1.4826 * statistics.median(diffs) / math.sqrt(2) * 0.798, MIN_SIGMA)


def find_steps(points: list[Point], threshold: float, floor: float = 0.0) -> tuple[list[Step], float | None]:
    values = [p.value for p in points]
    if len(values) < 2 * MIN_SEGMENT or any(v <= 0 for v in values):
        return [], None
    logs = [math.log(v) for v in values]
    sigma = noise_scale(logs)
    z = [v / sigma for v in logs]
    cuts = change_points(z, PENALTY_PER_LN_N * math.log(len(z)))
    bounds = [0, *cuts, len(values)]
    steps = []
    for k, cut in enumerate(cuts):
        before = statistics.median(values[bounds[k]:cut])
        after = statistics.median(values[cut:bounds[k + 2]])
        if abs(after - before) >= floor and abs(after / before - 1) > threshold:
            steps.append(Step(points[cut].run, before, after))
    return steps, sigma


def _time_point(run, c) -> Point | None:
    from memsleuth.analysis.regression import costs
    t = costs(c)
    if not t:
        return None
    e = stats.median_ci(t)
    return Point(run.id, run.created_at, e.median, e.low, e.high)


def series(runs: list, time_threshold: float = gating.DEFAULT_TIME_THRESHOLD,
           count_threshold: float = gating.DEFAULT_COUNT_THRESHOLD) -> list[Series]:
    """Every (cell, metric) measured in at least two of the runs (oldest first), with its steps."""
    from memsleuth.analysis.summary import analyse
    from memsleuth.analysis.regression import cell_key
    table: dict[tuple[str, str], Series] = {}
    for run in sorted(runs, key=lambda r: r.id):
        for g in analyse(run, cpu_time=False):
            for c in g.cells:
                key = f"{run.name}: {cell_key(c)}"
                p = _time_point(run, c)
                if p is not None:
                    table.setdefault((key, "time"), Series(key, "time", "s", [])).points.append(p)
                samples = [s for _, s in c.ok_samples]
                for m in gating.COUNTS:
                    vals = [v for s in samples if (v := m.read(s)) is not None]
                    if vals and any(vals):
                        e = stats.median_ci(vals)
                        table.setdefault((key, m.name), Series(key, m.name, m.unit, [])).points.append(
                            Point(run.id, run.created_at, e.median, e.low, e.high))
    out = []
    for (key, metric), s in table.items():
        if len(s.points) < 2:
            continue
        if metric == "time":
            s.steps, s.sigma = find_steps(s.points, time_threshold)
        else:
            m = next(m for m in gating.COUNTS if m.name == metric)
            s.steps, s.sigma = find_steps(s.points, count_threshold, m.floor)
        out.append(s)
    return out
