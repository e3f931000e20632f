"""Per-operation latency from the workloads' sampled histograms (native/workloads/ms_wl.h).

A workload times a random 1 in `every` of its allocator calls (two clock reads around the call)
into log-linear buckets: below 16 ns exact, above that 8 buckets per power of two. A bucket is
stored as [highest ns it holds, count]. Percentiles are read as the upper edge of the bucket the
rank falls in, so they are at most 12.5% above the true value, never below it; the maximum is
exact. Every sampled latency includes one timer cost (`timer_ns`, measured by the workload).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from memsleuth.records.documents import number, number_in, of_type
from memsleuth.records.model import Counts


@dataclass(frozen=True)
class Latency:
    op: str
    n: int
    p50: float
    p99: float
    p999: float
    max: float
    mean: float
    buckets: list[tuple[int, int]]           # merged histogram: (highest ns, count), ascending

    def to_dict(self) -> dict:
        return {"op": self.op, "n": self.n, "p50_ns": self.p50, "p99_ns": self.p99, "p99.9_ns": self.p999,
                "max_ns": self.max, "mean_ns": self.mean, "buckets": [list(b) for b in self.buckets]}


def merge(histograms: list[list[list[int]]]) -> list[tuple[int, int]]:
    """Bucket-wise sum of several runs' histograms of one operation."""
    total = Counts()
    for h in histograms:
        for high, count in h:
            total[int(high)] += int(count)
    return sorted(total.items())


def quantile(buckets: list[tuple[int, int]], q: float) -> float:
    """The upper edge of the bucket holding the q-quantile (rank ceil(q*n), 1-based)."""
    n = sum(c for _, c in buckets)
    if n == 0:
        raise ValueError("empty histogram")
    rank = max(1, -(-int(q * n * 1_000_000) // 1_000_000))   # ceil without float surprises at q*n integral
    seen = 0
    for high, count in buckets:
        seen += count
        if seen >= rank:
            return float(high)
    return float(buckets[-1][0])


def summarise(results: list[dict]) -> dict[str, Latency]:
    """Per operation, the merged latency of several runs' results (their "latency" member)."""
    per_op: dict[str, list[dict]] = {}
    for r in results:
        for op, h in _histograms(r).items():
            if h["n"]:
                per_op.setdefault(op, []).append(h)
    out = {}
    for op, hs in per_op.items():
        buckets = merge([h["buckets"] for h in hs])
        n = sum(c for _, c in buckets)
        if not n:
            continue
        out[op] = Latency(op, n, quantile(buckets, 0.50), quantile(buckets, 0.99), quantile(buckets, 0.999),
                          float(max(h["max"] for h in hs)), sum(h["sum"] for h in hs) / n, buckets)
    return out


def sampling_info(results: list[dict]) -> tuple[int, float] | None:
    """(mean operations between samples, timer cost ns) as the workload reported them."""
    for r in results:
        lat = of_type(r or {}, "latency", dict, {})
        every = number_in(lat, "every", 0.0)
        if every >= 1:
            return int(every), number_in(lat, "timer_ns", 0.0)
    return None


def operations_timed(result: dict | None) -> int:
    """How many operations a workload's result says it timed, over all of them."""
    return sum(h["n"] for h in _histograms(result).values())


def _histograms(result: dict | None) -> dict[str, dict]:
    """A workload result's per-operation histograms (its "latency" member, docs/json-schema.md),
    each {"n", "buckets": [(upper edge, count), ...], "max", "sum"}. A result line is whatever the
    program wrote to MEMSLEUTH_FD: a member, an operation or a bucket that is not numbers is left out."""
    ops = of_type(of_type(result or {}, "latency", dict, {}), "ops", dict, {})
    out = {}
    for op, h in ops.items():
        if not isinstance(h, dict):
            continue
        buckets = [(int(b[0]), int(b[1])) for b in of_type(h, "buckets", list, [])
                   if isinstance(b, (list, tuple)) and len(b) == 2 and all(_finite(x) for x in b)]
        out[str(op)] = {"n": int(number_in(h, "n", 0.0)), "buckets": buckets, "max": number_in(h, "max", 0.0),
                        "sum": number_in(h, "sum", 0.0)}
    return out


def _finite(v) -> bool:
    return (x := number(v)) is not None and math.isfinite(x)


# What one timed call costs beyond the call, in units of the workload's measured timer_ns (the
# duration of one clock read): two reads, the histogram update and a mispredicted branch came to
# about 60 ns against a timer_ns of 16 ns on this project's VM (bench/latency_cost.py: 1 in 64
# calls timed added 0.95 ns to random-mixed's 14 ns operations).
SAMPLE_COST_TIMERS = 4.0


def sampling_cost_share(samples_taken: int, timer_ns: float, region_ns: float) -> float | None:
    """The share of a region's time the sampling itself took, estimated as SAMPLE_COST_TIMERS
    clock reads per timed call (bench/latency_cost.py measures it directly)."""
    if region_ns <= 0:
        return None
    return samples_taken * SAMPLE_COST_TIMERS * timer_ns / region_ns
