"""Freed memory the allocator keeps (issue 21, fragmentation seen from inside and out): after the
live heap has fallen well below its peak, the process still holds most of its anonymous memory
resident. The heap accounting gives the live bytes; /proc gives the resident ones, at the live
peak and at exit."""
from __future__ import annotations

from memsleuth.analysis import memory
from memsleuth.events import MEMORY_FLOOR_BYTES
from memsleuth.analysis.findings.base import Finding, mib
from memsleuth.analysis.view import CellView
from memsleuth.records.heap import Heap, Snapshot

# The heap must have given back at least this share of its peak by exit ...
MIN_FREED_SHARE = 0.4
# ... while the anonymous memory stayed at this share of what it was at the peak, or more.
MIN_KEPT_SHARE = 0.8
# glibc's arena heaps hold "most" of what is kept: this share of it.
ARENA_SHARE = 0.5
# ... and, where the accounting's timeline says when, the live heap stayed fallen (under 1 -
# MIN_FREED_SHARE of its peak, never back to REGROWN_SHARE of it) for at least this share of the
# run at its end. A heap that grows back round after round reuses what was kept; one that falls
# only as the process ends (its teardown frees everything) keeps nothing the process goes on paying for.
LOW_SHARE = 0.2
REGROWN_SHARE = 0.9


def low_stretch(h: Heap, peak: float) -> tuple[float, float] | None:
    """(seconds at the end of the run in which the main process's live heap stayed fallen, the run's
    seconds); None where the accounting has no timeline to say it."""
    t, run = h.timeline, h.duration_s
    if len(t) < 2 or run <= 0 or peak <= 0:
        return None
    last_high = max((ms for ms, v in t if v >= REGROWN_SHARE * peak), default=t[0][0])
    fallen = next((ms for ms, v in t if ms >= last_high and v <= (1 - MIN_FREED_SHARE) * peak), None)
    return (max(0.0, run - fallen / 1000) if fallen is not None else 0.0), run


def exit_words(h: Heap, live: float) -> str:
    """How the evidence names the moment of `live` (memory.live_before_teardown's): "at exit", or
    before the teardown's frees, with what the heap held at exit (heap_overhead.py words it too)."""
    exit_live = float(h.main_live_bytes or 0)
    return "at exit" if live <= exit_live else f"before the frees of its teardown ({mib(exit_live)} at exit)"


def arenas_in(snap: Snapshot) -> tuple[int, float]:
    """glibc's arenas besides the main one in a heap accounting snapshot (the threads' arenas, in
    their 64 MiB-aligned heaps): (count, resident bytes); (-1, 0) when the allocator is not glibc."""
    return (snap.arenas if snap.arenas is not None else -1), (snap.arena_rss_kb or 0.0) * 1024


def peak_words(h: Heap) -> str:
    """How the evidence names the moment of the peak snapshot: the live peak, or (when the snapshot
    missed a brief peak, memory.near_peak) the lower moment it was read at."""
    at, live, peak = memory.near_peak(h)
    return "at the live peak" if at else f"when the live heap was {mib(live)} (its peak: {mib(peak)})"


def arena_evidence(snap: Snapshot, beyond: float, when: str) -> tuple[str | None, str]:
    """(evidence line, title words) when glibc's arena heaps hold ARENA_SHARE or more of the bytes
    beyond the live heap; (None, "") otherwise. heap_overhead.py words its finding with it too."""
    arenas, arena = arenas_in(snap)
    if arenas < 2 or arena < ARENA_SHARE * beyond:
        return None, ""
    return (f"{arenas} glibc arenas besides the main one (their 64 MiB-aligned heaps) hold {mib(arena)} resident "
            f"{when}: each arena keeps the memory freed in it", f"; {arenas} glibc thread arenas hold {mib(arena)}")


def own_words(snap: Snapshot, when: str) -> str | None:
    """The evidence line on the mappings made outside the allocator, where they hold memory (heap_overhead.py
    words its finding with it too)."""
    if not snap.own_anon_kb:
        return None
    n = snap.own_ranges or 0
    return (f"{mib(snap.own_anon_kb * 1024)} of the anonymous resident memory {when} is in {n:,} mapping"
            f"{'s' if n != 1 else ''} made with mmap outside the allocator (the program's own, a runtime's or a "
            f"library's; heap accounting){'' if snap.own_complete else ', at least'}: not malloc's, left out")

def check(view: CellView) -> list[Finding]:
    h = view.heap
    if not h:
        return []
    peak = memory.main_live(h)[0]          # the process whose memory the snapshots read
    live = memory.live_before_teardown(h)  # what it freed as it ended, the exit gave back too
    at_peak, at_exit = h.at_peak, h.at_exit
    # the anonymous memory that can be malloc's: the mappings made outside the allocator left out
    anon_peak, anon_exit = (at_peak.malloc_anon_kb or -1) * 1024.0, (at_exit.malloc_anon_kb or -1) * 1024.0
    if peak <= 0 or anon_peak <= 0 or anon_exit <= 0:
        return []
    freed = peak - live
    kept = anon_exit - live
    if freed < MIN_FREED_SHARE * peak or freed < MEMORY_FLOOR_BYTES or anon_exit < MIN_KEPT_SHARE * anon_peak \
            or kept < MEMORY_FLOOR_BYTES:
        return []
    stretch = low_stretch(h, peak)
    if stretch is not None and stretch[0] < LOW_SHARE * stretch[1]:
        return []
    arenas, arena = arenas_in(at_exit)
    evidence = [f"live heap {mib(peak)} at its peak, {mib(live)} {exit_words(h, live)}: {mib(freed)} freed "
                f"({freed / peak:.0%}; "
                f"threshold {MIN_FREED_SHARE:.0%})",
                f"anonymous resident memory {mib(anon_peak)} {peak_words(h)}, {mib(anon_exit)} at exit "
                f"({anon_exit / anon_peak:.0%}; threshold {MIN_KEPT_SHARE:.0%}): {mib(kept)} resident beyond the "
                "live heap"]
    if stretch is not None:
        evidence.append(f"the live heap stayed fallen (under {1 - MIN_FREED_SHARE:.0%} of its peak) for the last "
                        f"{stretch[0]:.2f} s of the {stretch[1]:.2f} s run (threshold {LOW_SHARE:.0%} of it): that long the "
                        "process held the memory beyond its live heap (heap accounting timeline)")
    line, arena_words = arena_evidence(at_exit, kept, "at exit")
    evidence += [line] if line else []
    own = own_words(at_exit, "at exit")
    evidence += [own] if own else []
    return [Finding(
        id="heap-retained", title=f"Freed memory kept resident: the live heap fell {mib(peak)} -> {mib(live)}, "
                                  f"anonymous memory stayed at {mib(anon_exit)}{arena_words}",
        mechanism="the program freed most of its heap, but the allocator kept the pages: free blocks scattered "
                  "between live ones (fragmentation) cannot be given back, and caches keep the rest",
        evidence=evidence,
        advice=("limit glibc's arenas (GLIBC_TUNABLES=glibc.malloc.arena_max=1 or 2), or " if arena_words else "")
        + "an allocator that returns freed pages (or glibc's malloc_trim after the phase that frees); allocate "
          "long-lived and short-lived objects apart so that freed blocks are contiguous",
        subject=view.label, confidence="high" if kept >= 2 * MEMORY_FLOOR_BYTES else "medium",
        numbers={"peak_live_bytes": peak, "live_bytes": live, "live_exit_bytes": float(h.main_live_bytes or 0),
                 "anon_peak_bytes": anon_peak,
                 "anon_exit_bytes": anon_exit, "kept_bytes": kept, "arenas": arenas, "arena_bytes": arena},
        cost_bytes=kept, cost_share=kept / anon_exit)]
