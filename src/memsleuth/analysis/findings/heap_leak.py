"""Live heap that grows to the end (issue 21): the heap accounting's timeline of live bytes keeps
rising and most of it is still live at exit. The allocation sites are those of the bytes still
live at exit (sampled by bytes, heap.py), not of everything allocated: a buffer that is allocated
often and freed is never named."""
from __future__ import annotations

from memsleuth.events import MEMORY_FLOOR_BYTES
from memsleuth.analysis.findings.base import Finding, mib
from memsleuth.analysis.view import CellView

# Growth: live bytes in the last fifth of the run's time at least this many times those of the first fifth.
MIN_GROWTH = 2.0
# Still there: live at exit at least this share of the peak (a heap that grows then shrinks is not a leak).
MIN_EXIT_SHARE = 0.8
# At least this many timeline points to speak of growth at all.
MIN_POINTS = 10
# Sites named: those holding at least this share of the bytes live at exit, at most this many.
SITE_SHARE = 0.05
MAX_SITES = 3


# Still growing: at least this share of the growth in the run's second half (live bytes from its
# middle to its last fifth). A working set filled first and then held, or an interpreter's object
# pool grown by its first job and reused by the others, is not growth to the end.
SECOND_HALF_SHARE = 0.25


def _at(timeline: list, lo: float, hi: float) -> float:
    """The median live bytes read between times lo and hi (ms); where none was read there (readings
    are taken as the heap grows, so a flat stretch has few), the last reading before lo."""
    inside = sorted(v for t, v in timeline if lo <= t <= hi)
    if inside:
        return inside[len(inside) // 2]
    before = [v for t, v in timeline if t < lo]
    return before[-1] if before else timeline[0][1]


def _fifths(timeline: list) -> tuple[float, float, float]:
    """Live bytes in the run's first fifth, around its middle and in its last fifth, by time."""
    t0, t1 = timeline[0][0], timeline[-1][0]
    fifth = (t1 - t0) / 5
    return (_at(timeline, t0, t0 + fifth), _at(timeline, t0 + 2 * fifth, t0 + 3 * fifth),
            _at(timeline, t1 - fifth, t1))


def check(view: CellView) -> list[Finding]:
    h = view.heap
    if not h:
        return []
    tl = h.timeline
    live, peak = h.live_bytes, h.peak_live_bytes
    if len(tl) < MIN_POINTS or live < MEMORY_FLOOR_BYTES or peak <= 0 or live < MIN_EXIT_SHARE * peak:
        return []
    first, middle, last = _fifths(tl)
    if last < MIN_GROWTH * max(first, 1.0) or last - middle < SECOND_HALF_SHARE * (last - first):
        return []
    span = tl[-1][0] - tl[0][0]
    rate = (last - first) / (span / 1000) if span > 0 else 0.0
    sites = [s for s in h.sites if s.live_bytes >= SITE_SHARE * live]
    sites = sorted(sites, key=lambda s: -s.live_bytes)[:MAX_SITES]
    evidence = [f"live heap {mib(first)} in the first fifth of the run, {mib(last)} in the last (threshold "
                f"{MIN_GROWTH:g}x), about {mib(rate)} per second; {mib(live)} still live at exit = "
                f"{live / peak:.0%} of the peak {mib(peak)} (threshold {MIN_EXIT_SHARE:.0%})"]
    sampled = h.sample_bytes or 0
    for s in sites:
        evidence.append(f"about {mib(s.live_bytes)} of it (~{min(1.0, s.live_bytes / live):.0%}) allocated at "
                        f"{s.site} and not freed (estimated from {s.samples:,.0f} allocations sampled one per "
                        f"{mib(sampled)} allocated, on average)")
    where = f" from {sites[0].site}" if sites else ""
    return [Finding(
        id="heap-leak", title=f"Live heap grows to the end: {mib(first)} -> {mib(last)}, {mib(live)} still live at "
                              f"exit{where}",
        mechanism="the live heap grows for the whole run and is still live at exit: memory allocated and not freed, "
                  "which is a leak, a structure that only grows, or data the program keeps until it ends",
        evidence=evidence,
        advice="free what the named sites allocate once it is no longer needed, or bound the structure that holds it; "
               "no allocator setting changes live bytes",
        subject=view.label, confidence="high" if last >= 2 * MIN_GROWTH * max(first, 1.0) else "medium",
        numbers={"live_first_bytes": first, "live_last_bytes": last, "live_exit_bytes": live, "peak_live_bytes": peak,
                 "bytes_per_s": rate, "sites": [s.site for s in sites]},
        who="program", cost_bytes=live, cost_share=None)]
