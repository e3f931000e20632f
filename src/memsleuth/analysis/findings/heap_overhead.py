"""Resident memory the live heap does not explain (issue 21): at the live peak or at exit, the
process's anonymous resident memory far above the bytes its heap holds live, from the heap
accounting of the explaining run (heap.py). The anonymous mappings the program made itself outside
the allocator (its own mmap buffers and pools, a runtime's heap, an interpreter's arenas: the
accounting keeps them, native/heap/ms_own.h) are not malloc's and are left out. What is left is the
allocator's overhead and the freed memory it keeps, or memory mapped where no preload sees the call
(thread stacks): the evidence names glibc's arena heaps when they hold most of it."""
from __future__ import annotations

from memsleuth.analysis import memory
from memsleuth.events import MEMORY_FLOOR_BYTES
from memsleuth.analysis.findings import heap_retained
from memsleuth.analysis.findings.base import Finding, mib
from memsleuth.analysis.view import CellView
from memsleuth.records.heap import Heap, Snapshot

# The unexplained part must be at least the memory floor and this share of the anonymous memory:
# allocators' size classes and caches stay well below it for ordinary heaps.
MIN_SHARE = 0.35


def _snapshot(h: Heap) -> tuple[str, float, float, Snapshot] | None:
    """(when, anonymous bytes, live bytes, snapshot): at exit while the heap still holds most of
    its peak; once the program has freed much of it, at the live peak (what stays resident after
    the frees is heap_retained.py's)."""
    peak = memory.main_live(h)[0]
    live = memory.live_before_teardown(h)   # what the frees as it ended gave back, the exit gave back too
    freed = peak > 0 and peak - live >= heap_retained.MIN_FREED_SHARE * peak
    when, snap = (heap_retained.peak_words(h), h.at_peak) if freed else ("at exit", h.at_exit)
    live_then = snap.live_bytes if freed else live
    anon = snap.malloc_anon_kb
    if anon is None or live_then is None:
        return None
    return when, anon * 1024.0, float(live_then), snap



def check(view: CellView) -> list[Finding]:
    h = view.heap
    if not h:
        return []
    snap = _snapshot(h)
    if snap is None:
        return []
    when, anon, live, s = snap
    extra = anon - live
    if extra < MEMORY_FLOOR_BYTES or extra < MIN_SHARE * anon:
        return []
    arenas, arena = heap_retained.arenas_in(s)
    live_when = heap_retained.exit_words(h, live) if when == "at exit" else when
    evidence = [f"{when}: {mib(anon)} of anonymous resident memory against {mib(live)} of live heap "
                f"{'' if live_when == when else live_when + ' '}"
                f"(usable bytes of every live block, heap accounting): {mib(extra)} = {extra / anon:.0%} is not in live "
                f"malloc blocks (thresholds {mib(MEMORY_FLOOR_BYTES)} and {MIN_SHARE:.0%})",
                f"peak live heap {mib(memory.main_live(h)[0])}; {h.allocs:,} allocations, "
                f"{h.frees:,} frees" + (f" in {h.processes} processes" if h.processes > 1 else "")]
    own = heap_retained.own_words(s, when)
    evidence += [own] if own else []
    line, arena_words = heap_retained.arena_evidence(s, extra, when)
    evidence += [line] if line else []
    return [Finding(
        id="heap-overhead", title=f"Resident memory not in live malloc blocks: {mib(extra)} of {mib(anon)} "
                                  f"anonymous {when}{arena_words}",
        mechanism="the process keeps far more anonymous memory resident than its malloc heap holds live: the "
                  "allocator's overhead and the freed memory it keeps (per-thread arenas and caches, fragmentation), "
                  "or memory mapped where the accounting does not see the call (thread stacks; the mappings made with "
                  "mmap outside the allocator are left out)",
        evidence=evidence,
        advice=("limit glibc's arenas (GLIBC_TUNABLES=glibc.malloc.arena_max=1 or 2) or try another allocator"
                if arena_words else "try an allocator that returns or reuses freed memory better; if the program has "
                "many threads, their stacks are part of it"),
        subject=view.label, confidence="high" if extra >= 2 * MIN_SHARE * anon else "medium",
        numbers={"anon_bytes": anon, "live_bytes": live, "unexplained_bytes": extra, "arenas": arenas,
                 "arena_bytes": arena, "when": when},
        cost_bytes=extra, cost_share=extra / anon)]
