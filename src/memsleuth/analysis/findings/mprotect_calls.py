"""mprotect calls that cost material time: protections changed again and again (guard pages set and
cleared per task, memory made read-only and writable again, a JIT flipping its code pages).

Each call takes the address-space lock for writing, splits the mapping at the range's edges (or
merges it back), rewrites the range's page-table entries and flushes their TLB entries, so a call
per task or per object pays all of that every time. Who makes the calls (the program, a runtime,
the allocator) comes from their call sites (summary.with_call_sites), as for every call a finding
names; where the allocator makes them, `made_by_allocator` words the finding for it. Under glibc
that is its thread arenas growing: each thread arena is a 64 MiB reservation that glibc makes
usable with mprotect only as far as its blocks need (grow_heap), about one call per 4 KiB page of
new heap (plain-arenas, 2 threads of 32 MiB: 17,351 calls, 5 with arena_max=1, 72 under mimalloc,
9 under jemalloc; 16 threads on a 16-core machine: 85% of the CPU time, 27.6 us per call against
4 us with 2 threads). Fewer arenas remove the calls but share the arenas' locks: `check --try` on
that 16-thread run measured arena_max=1 at +748% CPU time and arena_max=2 at +199%, mimalloc at
-90%, jemalloc -67%, tcmalloc -41% (with 2 threads here: arena_max=1 +12%, tcmalloc -42%); so the
other allocators come first in the advice.
"""
from __future__ import annotations

from dataclasses import replace

from memsleuth.analysis.cost import confidence_from_share
from memsleuth.analysis.findings.base import Finding, kernel_share, mib, rate_per_s
from memsleuth.analysis.view import CellView
from memsleuth.events import MPROTECT_FLOOR

# Fewer calls than this are set-up whatever they cost: a thread's guard page (one call per thread
# created), the loader's RELRO, a runtime making its heap accessible as it grows.
MIN_CALLS = MPROTECT_FLOOR
TITLE = "Page protections changed again and again (mprotect)"


def check(view: CellView) -> list[Finding]:
    if (calling := view.calling("mprotect", MIN_CALLS)) is None:
        return []
    sc, calls, split = calling
    spent = split.cost("mprotect")
    if not split.material(spent):
        return []
    where = "the process" if sc.name == "process" else f"region {sc.name}"
    evidence = [f"{calls:,.0f} mprotect calls in {where} ({rate_per_s(calls, sc.wall_ns):,.0f} per second) cost about "
                f"{split.describe(spent)} ({spent / calls / 1e3:,.1f} us per call; analysis/cost.py)",
                kernel_share(sc)]
    phase = view.phase("mprotect") if sc.name == "process" else None
    if phase:
        evidence.append(phase.text)
    share = split.share(spent)
    numbers = {"mprotect": calls, "sys_share": sc.sys_share}
    h = view.heap
    if h and h.at_exit.arenas is not None:    # glibc's malloc, its arenas read (records/heap.py)
        snaps = (h.at_peak, h.at_exit)
        numbers.update(glibc_arenas=max(s.arenas or 0 for s in snaps),
                       arena_bytes=max((s.arena_rss_kb or 0.0) * 1024 for s in snaps))
    return [Finding(
        id="mprotect-calls", title=f"{TITLE}: {split.describe(spent)}",
        mechanism="each mprotect call takes the address-space lock for writing, splits the mapping at the range's "
                  "edges or merges it back, rewrites the range's page-table entries and flushes their TLB entries: "
                  "protections changed per task or per object (guard pages set and cleared, memory made read-only "
                  "and writable again) pay all of it every time",
        evidence=evidence,
        advice="change protections once per region, not per use: set a guard page when a stack or buffer is created "
               "and keep it while the region is reused (a pool of ready stacks); protect or unprotect whole batches "
               "in one call",
        subject=view.label, confidence=confidence_from_share(share, confirmed=split.profile is not None),
        numbers=numbers,
        calls="mprotect", cost_ns=spent, cost_share=share, phase=phase.name if phase else None)]


def made_by_allocator(f: Finding) -> Finding:
    """The finding where its calls' sites say the allocator makes them (summary.with_call_sites):
    under glibc with thread arenas (the heap accounting read them), its arenas growing a page at a
    time; otherwise the allocator's own growth and trimming, whichever allocator it is."""
    arenas, held = f.numbers["glibc_arenas"] or 0, f.numbers["arena_bytes"] or 0.0
    cost = f.title.removeprefix(f"{TITLE}: ")     # the cost as check() worded it
    if not arenas:
        return replace(
            f, title=f"The allocator changes page protections again and again (mprotect): {cost}",
            mechanism="the calls come from inside malloc and free (their call sites): the allocator changes the "
                      "protection of its own memory, and each call takes the address-space lock for writing, splits "
                      "or merges the mapping and rewrites its page-table entries",
            advice="the allocator's options for how it commits and protects its memory, or another allocator "
                   "(compare them with `memsleuth compare`)")
    per_call = f" ({held / f.numbers['mprotect'] / 1024:,.1f} KiB for each call)" if held else ""
    evidence = [*f.evidence, f"the heap accounting read {arenas} glibc thread arena{'s' if arenas != 1 else ''} "
                             f"holding up to {mib(held)} resident{per_call}"]
    return replace(
        f, title=f"glibc's thread arenas grow a page at a time (mprotect): {cost}", evidence=evidence,
        mechanism="glibc gives each thread arena a 64 MiB reservation and makes it usable with mprotect only as far "
                  "as its blocks need, so a growing arena calls mprotect for about every 4 KiB page of new heap "
                  "(glibc.malloc.top_pad sets only a new arena heap's first size, not its growth); each call takes "
                  "the address-space lock for writing and splits or merges the arena's mapping. The main arena grows "
                  "by brk instead, with top_pad's margin",
        advice="an allocator that commits memory in larger steps (mimalloc, jemalloc, tcmalloc); fewer glibc arenas "
               "(GLIBC_TUNABLES=glibc.malloc.arena_max=1 or 2) remove the calls too, but the threads then share the "
               "arenas and wait for each other's locks, which with many threads can cost more than the calls")
