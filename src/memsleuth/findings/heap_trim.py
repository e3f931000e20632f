"""Heap-top trim churn (seed 000): every step's frees merge into the top chunk, free() trims it
(the program break moves down), and the next step faults all those pages in again."""
from __future__ import annotations

from memsleuth.units import PAGE_BYTES
from memsleuth.findings.base import Finding, confidence, kernel_share, mib
from memsleuth.findings.view import CellView

# glibc trims when the top chunk exceeds trim_threshold (128 KiB by default), so smaller moves
# are its ordinary housekeeping; twice that per step is a real churn.
MIN_SHRINK_PER_STEP = 256 * 1024
# The break must move down in most steps, not once.
MIN_SHRINKING_SHARE = 0.5
# The re-faults must account for the returned memory: at least half of its pages per step.
MIN_REFAULT_RATIO = 0.5
# Without step regions: a heap that only grows moves the break about once per 128 KiB (glibc's
# default top_pad) of net growth. Four times more brk calls than that growth explains means the
# top was trimmed and grown again; fewer than 50 calls in all is not a churn.
GROWTH_STEP_BYTES = 128 * 1024
CALLS_PER_GROWTH_STEP = 4.0
MIN_BRK_CALLS = 50


# Whole process (no regions): the break must move down at least this many times, by at least
# MIN_SHRINK_PER_STEP on average, and the faults must account for MIN_REFAULT_RATIO of the bytes.
MIN_DOWN_MOVES = 10
# Without the brk arguments: drops of the heap seen in the timeline (sampled, so a lower bound).
MIN_HEAP_DROPS = 5


def check(view: CellView) -> list[Finding]:
    steps = view.step_regions()
    if steps:
        return _steps(view, steps)
    if view.main is not None:
        return _rate(view)
    return _process(view)


def _advice() -> str:
    return ("reuse the buffers instead of freeing them every iteration; or keep the top of the heap: "
            "GLIBC_TUNABLES=glibc.malloc.trim_threshold=<more than one iteration's bytes> (or glibc.malloc.top_pad); "
            "or an allocator that does not trim eagerly")


def _process(view: CellView) -> list[Finding]:
    sc = view.process
    if sc is None or sc.minflt is None:
        return []
    fault_bytes = sc.minflt * PAGE_BYTES
    down_moves, down_bytes = view.args("brk", "down_moves"), view.args("brk", "down_bytes")
    if down_moves is not None:
        if down_moves < MIN_DOWN_MOVES or not down_bytes or down_bytes / down_moves < MIN_SHRINK_PER_STEP:
            return []
        ratio = fault_bytes / down_bytes
        if ratio < MIN_REFAULT_RATIO:
            return []
        up_moves, up_bytes = view.args("brk", "up_moves") or 0, view.args("brk", "up_bytes") or 0
        evidence = [f"the program break moved down {down_moves:,.0f} times by {mib(down_bytes)} in all "
                    f"({mib(down_bytes / down_moves)} per move), and up {up_moves:,.0f} times by {mib(up_bytes)} "
                    "(the results of the brk calls, from the kernel)",
                    f"{sc.minflt:,.0f} page faults = {mib(fault_bytes)}, {ratio:.2f}x the memory the trims returned",
                    kernel_share(sc)]
        margin = min(down_moves / MIN_DOWN_MOVES, 2 * ratio)
        numbers = {"brk_down_moves": down_moves, "brk_down_bytes": down_bytes, "minflt": sc.minflt}
    else:
        t = view.median_sample.timeline if view.median_sample else None
        heap = t.column("heap_kb") if t else None
        if not heap or sc.syscalls.get("brk", 0) < MIN_BRK_CALLS:
            return []
        drops = [a - b for a, b in zip(heap, heap[1:]) if (a - b) * 1024 >= MIN_SHRINK_PER_STEP]
        dropped = sum(drops) * 1024
        if len(drops) < MIN_HEAP_DROPS or fault_bytes < MIN_REFAULT_RATIO * dropped:
            return []
        evidence = [f"the heap shrank {len(drops)} times by {mib(dropped)} in all between the timeline's samples "
                    f"(every {t.interval_ms} ms, so at least that often), with {sc.syscalls['brk']:,.0f} brk calls",
                    f"{sc.minflt:,.0f} page faults = {mib(fault_bytes)}, {fault_bytes / dropped:.2f}x what it gave back",
                    kernel_share(sc)]
        margin = len(drops) / MIN_HEAP_DROPS
        numbers = {"heap_drops": len(drops), "heap_dropped_bytes": dropped, "minflt": sc.minflt}
    return [Finding(
        id="heap-trim-churn", title="Heap-top trimming: the heap gives its memory back and faults it in again",
        mechanism="frees leave free memory at the top of the heap, free() trims it (the program break moves "
                  "down), and the next allocations move the break up and fault those pages in again",
        evidence=evidence, advice=_advice(), subject=view.label, confidence=confidence(margin),
        numbers=numbers, calls="brk")]


def _steps(view: CellView, steps) -> list[Finding]:
    shrink = max(steps, key=lambda s: s.brk_shrink_per_step)
    faulting = max(steps, key=lambda s: s.minflt_per_step)
    if shrink.brk_shrink_per_step < MIN_SHRINK_PER_STEP or shrink.shrinking_steps < MIN_SHRINKING_SHARE * shrink.steps:
        return []
    returned_pages = shrink.brk_shrink_per_step / PAGE_BYTES
    ratio = faulting.minflt_per_step / returned_pages
    if ratio < MIN_REFAULT_RATIO:
        return []
    brk_calls = sum(s.syscalls_per_step.get("brk", 0) for s in steps)
    evidence = [
        f"the program break moved down {mib(shrink.brk_shrink_per_step)} per step in region '{shrink.name}' "
        f"({shrink.shrinking_steps} of {shrink.steps} steps)",
        f"region '{faulting.name}' then took {faulting.minflt_per_step:,.0f} page faults per step = "
        f"{mib(faulting.minflt_per_step * PAGE_BYTES)}, {ratio:.2f}x the memory returned",
        f"region '{faulting.name}' took {faulting.wall_ns_per_step / 1e6:.2f} ms per step",
    ]
    if brk_calls:
        evidence.append(f"{brk_calls:.1f} brk calls per step inside the regions")
    return [Finding(
        id="heap-trim-churn", title="Heap-top trimming: every step gives its memory back and faults it in again",
        mechanism="the step's frees leave free memory at the top of the heap, free() trims it (the program break "
                  "moves down), and the next step faults that memory in again",
        evidence=evidence,
        advice="hoist the allocations out of the loop (allocate once, reuse); or keep the top: "
               "GLIBC_TUNABLES=glibc.malloc.trim_threshold=<more than the step's bytes> (or top_pad), "
               "or a fixed glibc.malloc.mmap_threshold so big buffers are mmapped instead; "
               "or an allocator that does not trim eagerly",
        subject=view.label,
        confidence=confidence(min(shrink.brk_shrink_per_step / MIN_SHRINK_PER_STEP, 2 * ratio)),
        numbers={"shrink_bytes_per_step": shrink.brk_shrink_per_step, "faults_per_step": faulting.minflt_per_step,
                 "steps": shrink.steps, "trim_region": shrink.name, "fault_region": faulting.name})]


def _rate(view: CellView) -> list[Finding]:
    sc = view.main
    if sc is None or "brk" not in sc.syscalls or sc.minflt is None or sc.brk_delta_bytes is None:
        return []
    brk = sc.syscalls["brk"]
    growth_steps = max(0.0, sc.brk_delta_bytes) / GROWTH_STEP_BYTES + 1
    excess = brk / growth_steps
    if brk < MIN_BRK_CALLS or excess < CALLS_PER_GROWTH_STEP or sc.minflt < brk / 2:
        return []
    rate = f" = {sc.per_kop(brk):.2f} per 1000 ops" if sc.ops else ""
    return [Finding(
        id="heap-trim-churn", title="Heap-top trimming: the program break keeps moving down and up",
        mechanism="free() trims the heap top and malloc grows it again, and the regrown pages are faulted in again",
        evidence=[f"{brk:,.0f} brk calls in region main{rate}, for a net growth of the break of "
                  f"{mib(max(0.0, sc.brk_delta_bytes))}: {excess:.0f}x the calls that growth needs "
                  f"(threshold {CALLS_PER_GROWTH_STEP:.0f}x)",
                  f"{sc.minflt:,.0f} page faults in region main"],
        advice="keep the top: GLIBC_TUNABLES=glibc.malloc.trim_threshold=<larger> and/or glibc.malloc.top_pad; "
               "or reuse buffers instead of freeing them",
        subject=view.label, confidence=confidence(excess / CALLS_PER_GROWTH_STEP),
        numbers={"brk": brk, "net_brk_growth_bytes": sc.brk_delta_bytes, "minflt": sc.minflt})]
