"""RSS growth over the run (a leak, or a cache without a bound): the process tree's resident
memory keeps rising to the end, read from ms-run's timeline."""
from __future__ import annotations

from memsleuth.analysis.findings.base import Finding, confidence_from_margin, mib
from memsleuth.analysis.view import CellView

# The timeline must span at least this long and hold this many points: a short run's ramp is
# its start-up.
MIN_SPAN_MS = 500
MIN_POINTS = 10
# From a quarter into the run to its end, RSS must grow by this much and by this factor...
MIN_GROWTH_BYTES = 64 << 20
MIN_FACTOR = 1.5
# ...rising (or flat) in most of the intervals, and never falling back by more than this share
# of the growth: a heap that is freed and regrown (churn) is not a leak.
RISING_SHARE = 0.8
MAX_FALL_SHARE = 0.1
# ...and still rising in the second half of that window by at least this share of the growth: a
# program that fills its working set and then holds it (a ramp, then flat) does not grow to the end.
LATE_SHARE = 0.25
# Growth that goes on this long is more than a program building its working data.
LONG_RUN_S = 10.0


def check(view: CellView) -> list[Finding]:
    s = view.median_sample
    t = s.timeline if s else None
    rss = t.column("rss_kb") if t else None
    if rss:  # a last point read while the process exited holds no memory: not a measurement
        while len(rss) > 1 and rss[-1] == 0:
            rss = rss[:-1]
    if not rss or len(rss) < MIN_POINTS or t.times_ms[-1] - t.times_ms[0] < MIN_SPAN_MS:
        return []
    times = t.times_ms
    start = len(rss) // 4
    a, b = rss[start], rss[-1]
    growth = (b - a) * 1024
    if growth < MIN_GROWTH_BYTES or b < MIN_FACTOR * max(a, 1):
        return []
    steps = list(zip(rss[start:], rss[start + 1:]))
    rising = sum(1 for x, y in steps if y >= x) / len(steps)
    biggest_fall = max(0, max((x - y for x, y in steps), default=0)) * 1024
    if rising < RISING_SHARE or biggest_fall > MAX_FALL_SHARE * growth:
        return []
    mid = start + (len(rss) - start) // 2
    late = (b - rss[mid]) * 1024
    if late < LATE_SHARE * growth:
        return []
    seconds = (times[-1] - times[start]) / 1000
    # From outside, a program that builds its data until it exits and a leak look the same: the
    # finding says so, and stays at low confidence unless the growth goes on for LONG_RUN_S.
    long_run = seconds >= LONG_RUN_S
    return [Finding(
        id="rss-growth", title=f"Resident memory grows to the end of the run: +{mib(growth)}",
        mechanism="memory is allocated and kept to the end: resident memory rises steadily and never comes back "
                  "down. From outside, data a program keeps on purpose until it exits and memory it never frees look "
                  "the same: this run does not show which",
        evidence=[f"RSS of the process tree grew from {mib(a * 1024)} at {times[start] / 1000:.2f} s to "
                  f"{mib(b * 1024)} at the end ({times[-1] / 1000:.2f} s): {mib(growth / seconds)}/s",
                  f"it rose or held in {rising:.0%} of the {t.interval_ms} ms intervals (threshold {RISING_SHARE:.0%}); "
                  f"the largest fall was {mib(biggest_fall)}; {mib(late)} of it ({late / growth:.0%}) in the second half "
                  f"of that window, from {times[mid] / 1000:.2f} s (threshold {LATE_SHARE:.0%})"],
        advice="find what is allocated and never freed with the language's heap profiler (heaptrack or valgrind "
               "--leak-check for C and C++, pprof's heap profile for Go, tracemalloc for Python, a heap dump for the "
               "JVM, --heap-prof for Node.js) or bound the cache; "
               "if the memory is meant to be kept, nothing to change",
        subject=view.label,
        confidence=(confidence_from_margin(min(growth / MIN_GROWTH_BYTES, rising / RISING_SHARE * 1.5))
                    if long_run else "low"),
        numbers={"rss_start_kb": a, "rss_end_kb": b, "rising_share": rising}, cost_bytes=growth,
        cost_share=growth / (b * 1024) if b else None)]
