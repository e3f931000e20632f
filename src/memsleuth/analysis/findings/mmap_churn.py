"""mmap/munmap churn of large blocks: buffers above the mmap threshold get a fresh mapping on
every allocation, are unmapped on free, and are faulted in again on first touch."""
from __future__ import annotations

from memsleuth.analysis.findings.base import Finding, kernel_share, mib
from memsleuth.analysis import cost as cost_mod
from memsleuth.analysis.cost import REFAULT_SHARE, confidence_from_share
from memsleuth.units import PAGE_BYTES
from memsleuth.events import MECHANISM_FLOORS
from memsleuth.records.cpu_profile import FAULT, when_key
from memsleuth.analysis.view import HUGE_WORDS_SHARE, CellView

# At least this many munmap calls per step (or per 1000 ops): each is a whole mapping torn down.
MUNMAP_PER_STEP = 1.0
MUNMAP_PER_KOP = 1.0
# Each mapping must be faulted in again: more than a few pages each on average.
FAULTS_PER_MAPPING = 8.0


# Whole process: at least this many munmap calls (fewer are the loader's and the runtime's
# housekeeping whatever they cost); the cost of the calls, of the pages they released and of the
# faults of the memory mapped again decides (analysis/cost.py), with or without re-faults.
MIN_MUNMAPS = MECHANISM_FLOORS["munmap"]
# Where the faults are traced by address (and the time sampled), the cost decides, not the count:
# 60 unmaps of 16 MiB buffers, touched again, cost 45% of a run. Two calls at least: one is a
# program's single release, nothing that churns.
MIN_MUNMAPS_TRACED = 2
# Blocks of at least this size on average are "large blocks" (an allocator's mmap threshold is
# 128 KiB to a few MiB); smaller ones are a program's own small mappings.
LARGE_BLOCK_BYTES = 64 << 10
# Below this share of anonymous bytes among what mmap mapped, the mappings are files' (mmap's arguments).
FILE_MAPPED_SHARE = 0.5
# From this share of the bytes mapped asking MAP_POPULATE, the mappings are populated ones (mmap's arguments).
POPULATED_SHARE = 0.5


def _process(view: CellView) -> list[Finding]:
    sc = view.process
    if sc is None or sc.minflt is None:
        return []
    floor = MIN_MUNMAPS_TRACED if view.traced_for(sc) is not None and view.sampled_for(sc) is not None else MIN_MUNMAPS
    if sc.syscalls["munmap"] < floor:
        return []
    munmaps, mmaps = sc.syscalls["munmap"], sc.syscalls["mmap"]
    split = view.kernel_split(sc)
    unmapped = view.args("munmap", "bytes")
    fault_bytes = sc.minflt * PAGE_BYTES
    refault_pages = min(view.refault_bound(sc), unmapped / PAGE_BYTES) if unmapped else 0.0
    refault_ns, traced = view.refault_cost(sc, split, "munmap", refault_pages)
    spent = split.cost("mmap", "munmap") + refault_ns
    if not split.material(spent):
        return []
    evidence = [f"{mmaps:,.0f} mmap and {munmaps:,.0f} munmap calls cost about {split.describe(spent)} (the calls "
                f"{split.cost('mmap', 'munmap') / 1e6:,.0f} ms with the pages they released, the faults of the memory "
                f"mapped again {'' if traced else 'at most '}{refault_ns / 1e6:,.0f} ms; analysis/cost.py)"]
    if traced:
        evidence.append(traced)
    if unmapped is not None:
        per = unmapped / munmaps
        large = per >= LARGE_BLOCK_BYTES
        # traced: the re-faults' own cost is material; else enough faults to re-fault most of what was unmapped
        refaults = split.material(refault_ns) if traced else refault_pages * PAGE_BYTES >= REFAULT_SHARE * unmapped
        # which part the cost is mostly: the calls (with the pages they release) or the re-faults
        calls_first = split.cost("mmap", "munmap") >= refault_ns
        # What was mapped: anonymous memory, or files (a file's mapping gives no memory back when unmapped).
        mapped, anon = view.args("mmap", "bytes"), view.args("mmap", "anon_bytes")
        files = bool(mapped and anon is not None and anon < FILE_MAPPED_SHARE * mapped)
        evidence.append(f"munmap {'unmapped' if files else 'returned'} {mib(unmapped)} ({mib(per)} per call; "
                        f"{view.args_source('munmap')})")
        if files:
            evidence.append(f"mmap mapped {mib(mapped)}, of which {mib(anon)} anonymous: the mappings are files'")
            if traced:        # the re-faults are file pages: their time is the file-backed faults' finding
                evidence.remove(traced)
        if not traced:
            evidence.append(f"{sc.minflt:,.0f} page faults = {mib(fault_bytes)} if each was one page, "
                            f"{fault_bytes / unmapped:.2f}x the bytes unmapped")
        what = "large blocks" if large else f"small mappings ({per / 1024:,.0f} KiB each on average)"
        mechanism = (f"{what} get a fresh mapping when allocated and are unmapped when freed: every cycle pays an "
                     "mmap and a munmap")
        # MAP_POPULATE: the pages are faulted in inside mmap, so that time is the calls' own.
        populated = view.args("mmap", "populate_bytes")
        if not files and populated and mapped and populated >= POPULATED_SHARE * mapped:
            evidence.append(f"mmap asked MAP_POPULATE for {mib(populated)} of the {mib(mapped)} it mapped "
                            f"({view.args_source('mmap')})")
            mechanism = (f"{what} are mapped with MAP_POPULATE and unmapped again: every cycle pays an mmap that "
                         "faults in the whole block inside the call (zeroing every page, used or not) and a munmap "
                         "that frees it")
        if files:
            mechanism = ("a file is mapped and unmapped again and again: every cycle pays an mmap and a munmap "
                         "(tearing down the pages it mapped), and the next mapping faults the file's pages in again; "
                         "those faults are the file-backed faults' finding")
        elif refaults:
            mechanism += ", and the fresh memory is faulted in again on its first use" + (
                ", a whole 2 MiB huge page zeroed at a time" if view.huge_fill_share() >= HUGE_WORDS_SHARE else "")
            if traced and calls_first:
                mechanism += "; the calls cost more than those faults, so most of this cost is the calls themselves"
        else:
            mechanism += ("; the faults on memory given back by munmap cost little, so most of this cost is the calls "
                          "themselves" if traced else
                          "; the faults are fewer than the unmapped bytes, so most of the cost is the calls themselves")
        confirmed = True
    else:
        large = True
        mechanism = ("memory is mapped and unmapped again and again (the sizes were not recorded: `memsleuth check` "
                     "records them)")
        confirmed = False
    # The blocks that carry the bytes (a runtime's small mappings would drag an average down).
    block = view.heaviest_size("munmap")
    if block and unmapped and block >= 2 * unmapped / munmaps:
        evidence.append(f"most of the bytes unmapped are in blocks of {mib(block)} to {mib(2 * block)} (the calls' "
                        "size histogram)")
    kind = " of a file's mappings" if unmapped is not None and files else " of large blocks" if large else ""
    # The re-faults zero whole huge pages: true whoever makes the calls, and worth more than reuse
    # where the memory is touched sparsely (a table asked for huge pages, a few bytes per 2 MiB).
    huge = unmapped is not None and not files and refaults and view.huge_fill_share() >= HUGE_WORDS_SHARE
    phase = view.phase("mmap", "munmap", when_key(FAULT, release="munmap"))
    if phase:
        evidence.append(phase.text)
    evidence.append(kernel_share(sc))
    share = split.share(spent)
    return [Finding(
        id="mmap-churn", title=f"mmap/munmap churn{kind}: {split.describe(spent)}",
        mechanism=mechanism, evidence=evidence, subject=view.label,
        advice=((HUGE_REFAULT_ADVICE + "; ") if huge else "") + (FILE_ADVICE if unmapped is not None and files else
                HUGE_BLOCK_ADVICE.format(size=_blocks(block, view.size_class_mean("munmap", block)
                                                    or (unmapped / munmaps if unmapped else None)))
                if block and block >= 32 << 20
                else ADVICE if large else SMALL_ADVICE),
        confidence=confidence_from_share(share, confirmed),
        numbers={"munmap": munmaps, "mmap": mmaps, "minflt": sc.minflt, "unmapped_bytes": unmapped,
                 "block_bytes": block},
        calls="munmap", cost_ns=spent, cost_share=share, phase=phase.name if phase else None,
        advice_first=HUGE_REFAULT_ADVICE if huge else "")]


def _blocks(size_class: float, average: float | None) -> str:
    """The blocks' size as the calls' arguments give it: their average where it falls in the size
    class that carries the bytes (the calls are then of that size), else the class's range."""
    if average is not None and size_class <= average < 2 * size_class:
        return f"about {mib(average)}"
    return f"{mib(size_class)} to {mib(2 * size_class)}"


HUGE_REFAULT_ADVICE = ("each re-fault zeroes a whole 2 MiB huge page: if the program writes the mapping sparsely (a few "
                       "bytes per 2 MiB), leave huge pages off for it (no MADV_HUGEPAGE, or MADV_NOHUGEPAGE on that "
                       "range) so that only the 4 KiB pages it writes are zeroed")
FILE_ADVICE = ("map the file once and keep the mapping across uses (a mapping per request pays the calls and the "
               "faults every time); or read() what is needed into a buffer that is reused")
SMALL_ADVICE = ("keep the mappings and reuse them (a pool) instead of mapping and unmapping per use; for memory "
                "from malloc, an allocator that caches freed blocks")
ADVICE = ("reuse the buffers (allocate once outside the loop); or raise the mmap threshold "
          "(GLIBC_TUNABLES=glibc.malloc.mmap_threshold=<bytes above the block size>) so freed blocks stay in "
          "the heap; or an allocator that caches large blocks")
# Blocks above glibc's ceiling for the threshold (32 MiB on 64-bit: a higher value is ignored).
HUGE_BLOCK_ADVICE = ("reuse the buffers (allocate once outside the loop); glibc's mmap threshold cannot keep blocks of "
                     "{size} (its ceiling is 32 MiB on 64-bit): GLIBC_TUNABLES=glibc.malloc.mmap_max=0:"
                     "glibc.malloc.trim_threshold=<more than the block size> serves them from the heap and keeps them "
                     "there; or an allocator that caches large blocks")


def check(view: CellView) -> list[Finding]:
    if not view.step_regions() and view.main is None:
        return _process(view)
    steps = view.step_regions()
    if steps:
        munmaps = sum(s.syscalls_per_step["munmap"] for s in steps)
        mmaps = sum(s.syscalls_per_step["mmap"] for s in steps)
        faults = max(s.minflt_per_step for s in steps)
        faulting = max(steps, key=lambda s: s.minflt_per_step).name
        where, unit, threshold, rate = "per step", "step", MUNMAP_PER_STEP, munmaps
    else:
        sc = view.main
        if sc is None or not sc.ops or "munmap" not in sc.syscalls or sc.minflt is None:
            return []
        munmaps, mmaps, faults, faulting = sc.syscalls["munmap"], sc.syscalls["mmap"], sc.minflt, "main"
        where, unit, threshold, rate = "in region main", "1000 ops", MUNMAP_PER_KOP, sc.per_kop(sc.syscalls["munmap"])
    if rate < threshold or munmaps == 0:
        return []
    per_mapping = faults / munmaps
    if per_mapping < FAULTS_PER_MAPPING:
        return []
    u = view.units or cost_mod.DEFAULT
    spent = faults * u.fault_ns + munmaps * u.syscall("munmap") + mmaps * u.syscall("mmap")
    wall = max(s.wall_ns_per_step for s in steps) if steps else view.main.wall_ns
    share = spent / wall if wall else 0.0
    if share < cost_mod.MATERIAL_SHARE:
        return []
    return [Finding(
        id="mmap-churn", title=f"mmap/munmap churn of large blocks: {spent / 1e6:.2f} ms {where} = {share:.0%}",
        mechanism="blocks are unmapped when freed (in glibc: blocks above the mmap threshold), so their next use "
                  "gets fresh memory and faults its pages in again",
        evidence=[f"{munmaps:.1f} munmap and {mmaps:.1f} mmap calls {where} inside the regions "
                  f"(threshold {threshold} per {unit})",
                  f"{faults:,.0f} page faults {where} in region '{faulting}' = {per_mapping:,.0f} per unmapped block"],
        advice=ADVICE, subject=view.label, calls="munmap", confidence=confidence_from_share(share),
        numbers={"munmap": munmaps, "mmap": mmaps, "faults": faults, "faults_per_mapping": per_mapping},
        cost_ns=spent, cost_share=share)]
