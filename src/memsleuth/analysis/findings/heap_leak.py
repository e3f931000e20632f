"""Live heap that grows to the end (issue 21): the heap accounting's timeline of live bytes keeps
rising and most of it is still live at exit. The allocation sites are those of the bytes still
live at exit (sampled by bytes, heap.py), not of everything allocated: a buffer that is allocated
often and freed is never named.

A leak beside transient peaks (a server that leaks a little per request and allocates a large
buffer per request) never has most of its peak live at exit: there the heap's low points between
peaks are read instead (its floor in each fifth of the run), and a floor that rises through the
whole run and is still there at exit is the same finding."""
from __future__ import annotations

from memsleuth.events import MEMORY_FLOOR_BYTES
from memsleuth.analysis.findings.base import Finding, mib
from memsleuth.units import fmt_bytes
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


# The floor's growth (its last fifth's low point less its first's) that makes a finding: the
# timeline's readings are exact where the heap turns (a large free flushes the thread's counts),
# and a thread's counts are batched up to 256 KiB (ms_heap.c FLUSH_BYTES).
MIN_FLOOR_GROWTH = 512 << 10


def _floor(timeline: list, lo: float, hi: float) -> float:
    """The lowest live bytes read between times lo and hi (ms); where none was read there, the last
    reading before lo."""
    inside = [v for t, v in timeline if lo <= t <= hi]
    if inside:
        return min(inside)
    before = [v for t, v in timeline if t < lo]
    return before[-1] if before else timeline[0][1]


# Transient peaks the floor reading needs: at least one a fifth of the run on average (a server's requests);
# one large temporary in a run that otherwise grows level (a compiler's) is no series of peaks.
MIN_PEAKS = 5


def peaks(timeline: list, height: float) -> int:
    """How many times the live heap rose at least `height` above its low point and fell back by `height`."""
    if height <= 0 or not timeline:
        return 0
    n, low, high, rising = 0, timeline[0][1], timeline[0][1], True
    for _, v in timeline:
        if rising:
            low = min(low, v)
            if v >= low + height:
                rising, high = False, v
        else:
            high = max(high, v)
            if v <= high - height:
                n, rising, low = n + 1, True, v
    return n


def floors(timeline: list) -> list[float]:
    """The lowest the heap fell to from each fifth of the run on, by time: what it never again gave
    back. A fifth spent inside one peak (a first request that takes longer than a fifth: the test's
    server beside two busy loops) has no low point of its own, and the later ones stand for it."""
    t0, t1 = timeline[0][0], timeline[-1][0]
    fifth = (t1 - t0) / 5
    return [_floor(timeline, t0 + i * fifth, t1) for i in range(5)]


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
    if len(tl) < MIN_POINTS or peak <= 0:
        return []
    span_s = (tl[-1][0] - tl[0][0]) / 1000
    level = _by_level(tl, live, peak, span_s)
    # the timeline is the main process's: its low points are held against its own bytes at exit
    found = level or _by_floor(tl, h.main_live_bytes, span_s, h.processes > 1)
    if found is None:
        return []
    first, last, rate, evidence = found
    sites = [s for s in h.sites if s.live_bytes >= SITE_SHARE * live]
    sites = sorted(sites, key=lambda s: -s.live_bytes)[:MAX_SITES]
    sampled = h.sample_bytes or 0
    for s in sites:
        evidence.append(f"about {fmt_bytes(s.live_bytes)} of it (~{min(1.0, s.live_bytes / live):.0%}) allocated at "
                        f"{s.site} and not freed (the bytes live at exit, counted exactly, split among the sites by "
                        f"the allocations sampled one per {mib(sampled)} allocated on average)")
    if not sites and sampled and not any(s.live_bytes > 0 for s in h.sites):
        evidence.append(f"no allocation sampled (one per {mib(sampled)} allocated, on average) is still live at exit, "
                        "so no site is named: the bytes left are too few for the sampling to have caught one; run "
                        "check again with MEMSLEUTH_HEAP_SAMPLE set to fewer bytes (65536: one per 64 KiB) to sample "
                        "more often")
    where = f" from {sites[0].site}" if sites else ""
    what = "Live heap grows to the end" if level else "Live heap left behind between peaks grows to the end"
    return [Finding(
        id="heap-leak", title=f"{what}: {fmt_bytes(first)} -> {fmt_bytes(last)}, {fmt_bytes(live)} still live at "
                              f"exit{where}",
        mechanism=("the live heap grows for the whole run and is still live at exit" if level else
                   "between the run's transient peaks the live heap falls back to a low point, and that low point "
                   "rises for the whole run and is still live at exit") +
                  ": memory allocated and not freed, which is a leak, a structure that only grows, or data the "
                  "program keeps until it ends",
        evidence=evidence,
        advice="free what the named sites allocate once it is no longer needed, or bound the structure that holds it; "
               "no allocator setting changes live bytes",
        subject=view.label, confidence="high" if last >= 2 * MIN_GROWTH * max(first, 1.0) else "medium",
        numbers={"live_first_bytes": first, "live_last_bytes": last, "live_exit_bytes": live, "peak_live_bytes": peak,
                 "bytes_per_s": rate, "sites": [s.site for s in sites], "by": "level" if level else "floor"},
        who="program", cost_bytes=live, cost_share=None)]


def _rate(first: float, last: float, span_s: float) -> float:
    return (last - first) / span_s if span_s > 0 else 0.0


def _by_level(tl: list, live: float, peak: float, span_s: float) -> tuple[float, float, float, list[str]] | None:
    """(first, last, bytes a second, evidence) where the live heap itself grows to the end and most
    of its peak is live at exit."""
    if live < MEMORY_FLOOR_BYTES or live < MIN_EXIT_SHARE * peak:
        return None
    first, middle, last = _fifths(tl)
    if last < MIN_GROWTH * max(first, 1.0) or last - middle < SECOND_HALF_SHARE * (last - first):
        return None
    rate = _rate(first, last, span_s)
    return first, last, rate, [
        f"live heap {mib(first)} in the first fifth of the run, {mib(last)} in the last (threshold {MIN_GROWTH:g}x), "
        f"about {fmt_bytes(rate)} per second; {mib(live)} still live at exit = {live / peak:.0%} of the peak "
        f"{mib(peak)} (threshold {MIN_EXIT_SHARE:.0%})"]


def _by_floor(tl: list, live: float, span_s: float, several: bool) -> tuple[float, float, float, list[str]] | None:
    """(first, last, bytes a second, evidence) where the heap has transient peaks (MIN_PEAKS of at least half
    the height of its top over what is live at exit, which is under MIN_EXIT_SHARE of the top) and its low
    points (floors: what it never gave back from each fifth of the run on) rise by at least MIN_FLOOR_GROWTH
    and MIN_GROWTH times, in the second half too, and the last of them is still live at exit."""
    top = max(v for _, v in tl)
    # No transient peaks to fall back from (most of the top still live at exit: the heap grew level, which is
    # _by_level's to read, with its MEMORY_FLOOR_BYTES), or too few of them for low points between them: a
    # compiler's heap growing to 10.8 MiB of a 12.1 MiB top read "left behind between peaks" (high) here.
    if live >= MIN_EXIT_SHARE * top or peaks(tl, (top - live) / 2) < MIN_PEAKS:
        return None
    low = floors(tl)
    first, middle, last = low[0], low[2], low[4]
    if (last - first < MIN_FLOOR_GROWTH or last < MIN_GROWTH * max(first, 1.0)
            or last - middle < SECOND_HALF_SHARE * (last - first) or live < MIN_EXIT_SHARE * last):
        return None
    rate = _rate(first, last, span_s)
    return first, last, rate, [
        f"between peaks of up to {fmt_bytes(top)}, the lowest the live heap fell to from each fifth of the run on "
        f"rose: {', '.join(fmt_bytes(v) for v in low)} (threshold {MIN_GROWTH:g}x and {fmt_bytes(MIN_FLOOR_GROWTH)} "
        f"from the first fifth to the last), about {fmt_bytes(rate)} per second; {fmt_bytes(live)} still live at exit"
        f"{' in the process whose heap the timeline follows' if several else ''}, counted exactly"]
