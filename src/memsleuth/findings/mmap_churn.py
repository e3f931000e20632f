"""mmap/munmap churn of large blocks: buffers above the mmap threshold get a fresh mapping on
every allocation, are unmapped on free, and are faulted in again on first touch."""
from __future__ import annotations

from memsleuth.findings.base import Finding, confidence, kernel_share, mib
from memsleuth.units import PAGE_BYTES
from memsleuth.findings.view import CellView

# At least this many munmap calls per step (or per 1000 ops): each is a whole mapping torn down.
MUNMAP_PER_STEP = 1.0
MUNMAP_PER_KOP = 1.0
# Each mapping must be faulted in again: more than a few pages each on average.
FAULTS_PER_MAPPING = 8.0


# Whole process: at least this many munmap calls, of blocks of at least this size on average
# (small unmaps are the loader's and the runtime's housekeeping).
MIN_MUNMAPS = 100
MIN_BLOCK_BYTES = 64 << 10
# The faults must account for this share of the bytes unmapped: the memory comes back.
MIN_REFAULT_SHARE = 0.5


def _process(view: CellView) -> list[Finding]:
    sc = view.process
    if sc is None or sc.minflt is None or sc.syscalls.get("munmap", 0) < MIN_MUNMAPS:
        return []
    munmaps, mmaps = sc.syscalls["munmap"], sc.syscalls.get("mmap", 0)
    fault_bytes = sc.minflt * PAGE_BYTES
    unmapped = view.args("munmap", "bytes")
    if unmapped is not None:
        if unmapped / munmaps < MIN_BLOCK_BYTES or fault_bytes < MIN_REFAULT_SHARE * unmapped:
            return []
        evidence = [f"{munmaps:,.0f} munmap calls returned {mib(unmapped)} ({mib(unmapped / munmaps)} per call), "
                    f"with {mmaps:,.0f} mmap calls (the calls' arguments, from the kernel)",
                    f"{sc.minflt:,.0f} page faults = {mib(fault_bytes)}, {fault_bytes / unmapped:.2f}x the bytes unmapped"]
        margin = fault_bytes / unmapped / MIN_REFAULT_SHARE
    else:
        per_mapping = sc.minflt / munmaps
        if per_mapping < FAULTS_PER_MAPPING:
            return []
        evidence = [f"{munmaps:,.0f} munmap and {mmaps:,.0f} mmap calls",
                    f"{sc.minflt:,.0f} page faults = {per_mapping:,.0f} per unmapped block"]
        margin = per_mapping / FAULTS_PER_MAPPING
    evidence.append(kernel_share(sc))
    return [Finding(
        id="mmap-churn", title="mmap/munmap churn of large blocks",
        mechanism="large blocks get a fresh mapping when allocated and are unmapped when freed, so every use "
                  "faults its pages in again",
        evidence=evidence, advice=ADVICE, subject=view.label, confidence=confidence(margin),
        numbers={"munmap": munmaps, "mmap": mmaps, "minflt": sc.minflt, "unmapped_bytes": unmapped}, calls="munmap")]


ADVICE = ("reuse the buffers (allocate once outside the loop); or raise the mmap threshold "
          "(GLIBC_TUNABLES=glibc.malloc.mmap_threshold=<bytes above the block size>) so freed blocks stay in "
          "the heap; or an allocator that caches large blocks")


def check(view: CellView) -> list[Finding]:
    if not view.step_regions() and view.main is None:
        return _process(view)
    steps = view.step_regions()
    if steps:
        munmaps = sum(s.syscalls_per_step.get("munmap", 0) for s in steps)
        mmaps = sum(s.syscalls_per_step.get("mmap", 0) for s in steps)
        faults = max(s.minflt_per_step for s in steps)
        faulting = max(steps, key=lambda s: s.minflt_per_step).name
        where, unit, threshold, rate = "per step", "step", MUNMAP_PER_STEP, munmaps
    else:
        sc = view.main
        if sc is None or not sc.ops or "munmap" not in sc.syscalls or sc.minflt is None:
            return []
        munmaps, mmaps, faults, faulting = sc.syscalls["munmap"], sc.syscalls.get("mmap", 0), sc.minflt, "main"
        where, unit, threshold, rate = "in region main", "1000 ops", MUNMAP_PER_KOP, sc.per_kop(sc.syscalls["munmap"])
    if rate < threshold or munmaps == 0:
        return []
    per_mapping = faults / munmaps
    if per_mapping < FAULTS_PER_MAPPING:
        return []
    return [Finding(
        id="mmap-churn", title="mmap/munmap churn of large blocks",
        mechanism="blocks are unmapped when freed (in glibc: blocks above the mmap threshold), so their next use "
                  "gets fresh memory and faults its pages in again",
        evidence=[f"{munmaps:.1f} munmap and {mmaps:.1f} mmap calls {where} inside the regions (threshold {threshold} per {unit})",
                  f"{faults:,.0f} page faults {where} in region '{faulting}' = {per_mapping:,.0f} per unmapped block"],
        advice=ADVICE, subject=view.label, calls="munmap", confidence=confidence(min(rate / threshold, per_mapping / FAULTS_PER_MAPPING)),
        numbers={"munmap": munmaps, "mmap": mmaps, "faults": faults, "faults_per_mapping": per_mapping})]
