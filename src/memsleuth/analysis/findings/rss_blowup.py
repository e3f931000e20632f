"""RSS blow-up: resident memory far above the bytes the program says it keeps live."""
from __future__ import annotations

from memsleuth.analysis.findings.base import Finding, confidence_from_margin, mib

from memsleuth.analysis.view import CellView

# Four times the live bytes: allocators' normal overhead (size classes, per-thread caches,
# metadata) stays well below it at these sizes on this project's machine (<= 2x at ws=40000).
RATIO = 4.0
# And at least 64 MiB above them, so that small heaps' fixed costs (arenas, caches) never fire it.
MIN_EXCESS_BYTES = 64 << 20


def check(view: CellView) -> list[Finding]:
    live, rss_kb = view.peak_live_bytes, view.maxrss_kb
    if not live or rss_kb is None or view.heap:   # with heap accounting: heap_overhead.py says it better
        return []
    rss = rss_kb * 1024
    if rss < RATIO * live or rss - live < MIN_EXCESS_BYTES:
        return []
    return [Finding(
        id="rss-blowup", title="RSS blow-up: resident memory far above the live bytes",
        mechanism="the process holds many times the bytes the program reports live: freed memory is kept, not "
                  "reused, or not returned by the allocator",
        evidence=[f"peak RSS {mib(rss)} against {mib(live)} live at the peak, as the workload reports "
                  f"({rss / live:.1f}x; threshold {RATIO}x and +{mib(MIN_EXCESS_BYTES)})"],
        advice="look for memory that is never freed or never reused (a leak, per-thread caches that are never "
               "flushed, fragmentation); compare the allocators' peak RSS in the evidence table",
        subject=view.label, confidence=confidence_from_margin(rss / (RATIO * live)),
        numbers={"maxrss_bytes": rss, "live_bytes": live})]
