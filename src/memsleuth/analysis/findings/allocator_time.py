"""An allocator's own code taking a material share of the CPU time: malloc and free (finding a free
block, splitting and merging chunks, their caches), or a runtime's own allocator (Go's mallocgc,
CPython's object allocator), run often enough to cost, in user mode, so no system call or page
fault count shows it. From the explaining run's user chains (analysis/user_time.allocator_time): the
samples in the allocator's code over the program's samples (memsleuth's own heap accounting left out
of both). One finding per allocator whose part is material."""
from __future__ import annotations

from memsleuth.analysis import cost, user_time
from memsleuth.analysis.cost import confidence_from_share
from memsleuth.analysis.findings.base import Finding, named_callers
from memsleuth.analysis.view import CellView

# An allocator's time is worded as clearing what it hands out (a large buffer per request), or as
# copying what realloc moves (a buffer grown in small steps), where at least this share of its samples
# is that, not as finding slots for many small ones.
ZEROING_WORDS = 0.5
MALLOC_MECHANISM = ("the program allocates and frees often enough that the allocator's own work (finding a free "
                    "block, splitting and merging chunks, moving blocks through its caches) takes this share of the "
                    "CPU time; it runs in user mode, so no system call or page fault count shows it")
MALLOC_ZEROING_MECHANISM = ("a zeroed allocation (calloc, Rust's vec![0; n] and alloc_zeroed, value-initialised "
                            "arrays) must clear the block when the allocator hands out memory it used before (pages "
                            "fresh from the kernel are zero already), and most of the allocator's time here is that "
                            "clearing: a large block allocated zeroed again and again is written in full each time; "
                            "it runs in user mode, so no system call or page fault count shows it")
MALLOC_ZEROING_ADVICE = ("keep the buffer across requests instead of allocating it again, and clear only the part a "
                         "request uses; where every byte is written before it is read, allocate it uninitialised "
                         "(malloc instead of calloc, Vec::with_capacity and writes instead of vec![0; n]); another "
                         "allocator may hand out fresh pages instead, already zero but faulted in: measure {others} "
                         "on this program (`memsleuth check --try`)")
ZEROING_MECHANISM = ("{rt}'s own allocator clears the memory of each new object before handing it out, and "
                     "most of its time here is that clearing: large objects allocated again and again (a buffer "
                     "per request) are written in full before the program uses them; it runs in user mode, so no "
                     "system call or page fault count shows it (the faults of their fresh pages are counted apart)")
MALLOC_COPYING_MECHANISM = ("realloc cannot grow a block in place where the memory after it is in use, so it allocates "
                            "a new block, copies the contents and frees the old one, and most of the allocator's time "
                            "here is that copying: a buffer grown in small steps is copied in full at each step, so "
                            "the work grows with the square of its final size; it runs in user mode, so no system "
                            "call or page fault count shows it")
MALLOC_COPYING_ADVICE = ("grow the buffer geometrically (double its capacity when it is full) or reserve its final "
                         "size before filling it, so that realloc moves it a few times instead of at every step; "
                         "keep it across requests where its size repeats; allocators differ in what they can grow in "
                         "place: measure {others} on this program (`memsleuth check --try`)")
RUNTIME_MECHANISM = ("the program allocates often enough that {rt}'s own allocator (finding a free slot for each new "
                     "object and preparing it) takes this share of the CPU time; it runs in user mode, so no "
                     "system call or page fault count shows it, and it is not the collector's time (that is "
                     "counted apart)")


def check(view: CellView) -> list[Finding]:
    sc = view.process
    if sc is None:
        return []
    cs = view.cpu_stacks
    out = []
    for part in user_time.allocator_time(cs):
        paid = cost.user_part(sc, cs, part.samples)
        share, spent = paid.share, paid.ns
        if not cost.material(spent, share):
            continue
        head = cost.sampled_headline(spent, share, paid.interval)
        rt = part.runtime
        whose = f"{rt.name}'s own allocator" if rt else "the allocator's own code"
        fns = ", ".join(f"{fn} {k / part.samples:.0%}" for fn, k in part.functions)
        # the callers the chains name, where they hold most of the samples (a program built without frame
        # pointers names none past malloc; an interpreter's inlined helpers are not its callers)
        callers = ", ".join(f"{fn} {share:.0%}" for fn, share in named_callers(part.callers, part.samples))
        evidence = [f"{part.samples:,} of the program's {part.total:,} CPU samples were in {whose} (the explaining "
                    f"run's user call chains): {head}",
                    f"by function: {fns}"] + ([f"called from: {callers}"] if callers else [])
        zeroed = sum(k for _, k in part.zeroing)
        if zeroed:
            evidence.append(f"{zeroed / part.samples:.0%} of these samples were clearing the memory it hands out "
                            "(innermost in " + ", ".join(fn for fn, _ in part.zeroing) + ")")
        copied = sum(k for _, k in part.copying)
        if copied:
            evidence.append(f"{copied / part.samples:.0%} of these samples were copying blocks that realloc moves "
                            "(innermost in " + ", ".join(fn for fn, _ in part.copying) + ")")
        if part.wrapped:
            evidence.append(f"{part.wrapped:,} more samples were in memsleuth's heap accounting, which runs around each "
                            "malloc and free in the explaining run only: left out, as memsleuth's own")
        found = view.user_phase(part.when, memory=False)
        if found:
            evidence.append(found.text)
        where = "where the callers above do" if callers else "in the code that calls it"
        others = ", ".join(a for a in ("glibc", "mimalloc", "jemalloc", "tcmalloc") if a != view.allocator)
        if rt is None and copied >= ZEROING_WORDS * part.samples:
            title = f"Time in the allocator copying blocks that realloc moves: {head}"
            mechanism, advice = MALLOC_COPYING_MECHANISM, MALLOC_COPYING_ADVICE.format(others=others)
            numbers = {"share": share}
        elif rt is None and zeroed >= ZEROING_WORDS * part.samples:
            title = f"Time in the allocator clearing zeroed allocations (calloc): {head}"
            mechanism, advice = MALLOC_ZEROING_MECHANISM, MALLOC_ZEROING_ADVICE.format(others=others)
            numbers = {"share": share}
        elif rt is None:
            title = f"Time in the allocator's own code (malloc and free): {head}"
            mechanism = MALLOC_MECHANISM
            advice = (f"another allocator may spend less here: measure {others} on this program (`memsleuth check "
                      f"--try`, or `memsleuth compare`); or allocate less {where}: reuse objects, reserve "
                      "containers' sizes, free together what is allocated together (an arena or a pool)")
            numbers = {"share": share}
        else:
            zeroing = rt.zeroing_advice and zeroed >= ZEROING_WORDS * part.samples
            title = f"Time in {rt.name}'s own allocator" + (" clearing new objects" if zeroing else "") + f": {head}"
            mechanism = (ZEROING_MECHANISM if zeroing else RUNTIME_MECHANISM).format(rt=rt.name)
            advice = (rt.zeroing_advice if zeroing else rt.alloc_advice) + \
                ("; no malloc setting or other allocator reaches it" if rt.own_memory else "")
            numbers = {"share": share, "runtime": rt.name}
        out.append(Finding(
            id="allocator-time", title=title, mechanism=mechanism, evidence=evidence, advice=advice,
            subject=view.label, confidence=confidence_from_share(share), who="runtime" if rt else "allocator",
            numbers={**numbers, "functions": [f for f, _ in part.functions],
                     "callers": [c for c, _ in part.callers]},
            cost_ns=spent, cost_share=share, phase=found.name if found else None))
    return out
