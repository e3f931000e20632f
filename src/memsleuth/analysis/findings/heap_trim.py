"""Heap-top trim churn (seed 000): every step's frees merge into the top chunk, free() trims it
(the program break moves down), and the next step faults all those pages in again."""
from __future__ import annotations

from memsleuth.units import PAGE_BYTES
from memsleuth.analysis.findings.base import Finding, kernel_share, mib
from memsleuth.analysis import cost as cost_mod
from memsleuth.analysis.cost import confidence_from_share
from memsleuth.events import MECHANISM_FLOORS
from memsleuth.records.cpu_profile import FAULT, when_key
from memsleuth.analysis.view import CellView

# glibc trims when the top chunk exceeds trim_threshold (128 KiB by default), so smaller moves
# are its ordinary housekeeping; twice that per step is a real churn.
MIN_SHRINK_PER_STEP = 256 * 1024
# The break must move down in most steps, not once.
MIN_SHRINKING_SHARE = 0.5
# Without step regions: a heap that only grows moves the break about once per 128 KiB (glibc's
# default top_pad) of net growth. Four times more brk calls than that growth explains means the
# top was trimmed and grown again; fewer than 50 calls in all is not a churn.
GROWTH_STEP_BYTES = 128 * 1024
CALLS_PER_GROWTH_STEP = 4.0
MIN_BRK_CALLS = MECHANISM_FLOORS["brk"]


# Whole process (no regions): the break moving down at least this many times is trimming (any
# size: CPython's teardown trims page by page); the cost of the calls and of the re-faults decides
# whether it is worth a finding (analysis/cost.py).
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
    if sc is None or sc.minflt is None or sc.syscalls["brk"] < MIN_BRK_CALLS:
        return []
    brk = sc.syscalls["brk"]
    split = view.kernel_split(sc)
    down_moves, down_bytes = view.args("brk", "down_moves"), view.args("brk", "down_bytes")
    if down_moves is None:
        return _timeline(view, sc, split)
    up_moves, up_bytes = view.args("brk", "up_moves") or 0, view.args("brk", "up_bytes") or 0
    # Pages the break took back after giving them away are faulted in again: at most the smaller
    # of the bytes given and taken back, and never more than the faults beyond the peak's pages.
    refault_pages = min(view.refault_bound(sc), min(up_bytes, down_bytes or 0) / PAGE_BYTES)
    refault_ns, traced = view.refault_cost(sc, split, "brk", refault_pages)
    spent = split.cost("brk") + refault_ns
    if not split.material(spent):
        return []
    moves = (f"the program break moved down {down_moves:,.0f} times by {mib(down_bytes or 0)} in all"
             + (f" ({_size(down_bytes / down_moves)} per move)" if down_moves else "")
             + f", and up {up_moves:,.0f} times by {mib(up_bytes)}"
             + (f" ({_size(up_bytes / up_moves)} per move)" if up_moves else "")
             + " (the results of the brk calls, from the kernel)")
    evidence = [f"{brk:,.0f} brk calls and the page faults of the memory they took back cost about "
                f"{split.describe(spent)} (brk {split.cost('brk') / 1e6:,.0f} ms, re-faults "
                f"{'' if traced else 'at most '}{refault_ns / 1e6:,.0f} ms; analysis/cost.py)", moves]
    if traced:
        evidence.append(traced)
    if down_moves >= MIN_DOWN_MOVES:
        step = down_bytes / down_moves
        small = step <= 2 * PAGE_BYTES
        title = "Heap top given back and taken again: the program break keeps moving down and up"
        mechanism = ("the top of the heap is given back to the kernel by moving the program break down "
                     + ("a page or two at a time" if small else f"{_size(step)} at a time")
                     + " and taken again by moving it up")
        if traced:     # the faults' addresses say it: a material cost of re-faults
            if split.material(refault_ns):
                mechanism += ", and the memory taken again is faulted in again each time"
        elif up_bytes and refault_pages >= cost_mod.REFAULT_SHARE * min(up_bytes, down_bytes) / PAGE_BYTES:
            # An upper bound (faults beyond the pages resident at the peak), so said as room, not fact.
            mechanism += (", and there are enough faults beyond the peak's resident pages for the memory taken "
                          "again to be faulted in again each time")
        mechanism += (" (glibc's free() trims the heap top this way when it exceeds the trim threshold; a program "
                      "that manages the break itself does it too: who makes the calls says which)")
        advice = _advice()
    else:
        if up_moves < MIN_DOWN_MOVES:
            return []
        step = up_bytes / up_moves
        title = f"Heap grown in small steps: the program break moved up {up_moves:,.0f} times"
        mechanism = (f"the program break is moved up {up_moves:,.0f} times by {_size(step)} on average: the heap "
                     "grows a little at a time, one system call per step")
        advice = ("grow in larger steps: GLIBC_TUNABLES=glibc.malloc.top_pad=<bytes> for glibc's heap; a program "
                  "that calls sbrk itself should reserve its memory once")
    evidence.append(f"{sc.minflt:,.0f} page faults in the process = {mib(sc.minflt * PAGE_BYTES)}")
    phase = view.phase("brk", when_key(FAULT, release="brk"))
    if phase:
        evidence.append(phase.text)
    return [Finding(
        id="heap-trim-churn", title=f"{title}: {split.describe(spent)}", mechanism=mechanism,
        evidence=evidence, advice=advice, subject=view.label, confidence=confidence_from_share(split.share(spent)),
        numbers={"brk": brk, "brk_down_moves": down_moves, "brk_down_bytes": down_bytes, "brk_up_moves": up_moves,
                 "brk_up_bytes": up_bytes, "minflt": sc.minflt},
        calls="brk", cost_ns=spent, cost_share=split.share(spent), phase=phase.name if phase else None)]


def _size(n_bytes: float) -> str:
    return f"{n_bytes / 1024:,.0f} KiB" if n_bytes < (1 << 20) else mib(n_bytes)


def _timeline(view: CellView, sc, split) -> list[Finding]:
    """Without the brk calls' arguments: drops of the heap seen in the timeline (sampled, so a
    lower bound of the trims)."""
    t = view.median_sample.timeline if view.median_sample else None
    heap = t.column("heap_kb") if t else None
    if not heap:
        return []
    drops = [a - b for a, b in zip(heap, heap[1:]) if (a - b) * 1024 >= MIN_SHRINK_PER_STEP]
    dropped = sum(drops) * 1024
    fault_bytes = sc.minflt * PAGE_BYTES
    if len(drops) < MIN_HEAP_DROPS or fault_bytes < cost_mod.REFAULT_SHARE * dropped:
        return []
    refault_ns = min(dropped / PAGE_BYTES * split.units.fault_ns * split.scale,
                     split.cost("page-faults") * view.zero_fill_share())
    spent = split.cost("brk") + refault_ns
    if not split.material(spent):
        return []
    return [Finding(
        id="heap-trim-churn", title=f"Heap-top trimming: the heap gives its memory back and faults it in again: "
                                    f"{split.describe(spent)}",
        mechanism="frees leave free memory at the top of the heap, free() trims it (the program break moves "
                  "down), and the next allocations move the break up and fault those pages in again",
        evidence=[f"the heap shrank {len(drops)} times by {mib(dropped)} in all between the timeline's samples "
                  f"(every {t.interval_ms} ms, so at least that often), with {sc.syscalls['brk']:,.0f} brk calls",
                  f"{sc.minflt:,.0f} page faults = {mib(fault_bytes)}, {fault_bytes / dropped:.2f}x what it gave back",
                  kernel_share(sc)],
        advice=_advice(), subject=view.label, confidence=confidence_from_share(split.share(spent), confirmed=False),
        numbers={"heap_drops": len(drops), "heap_dropped_bytes": dropped, "minflt": sc.minflt}, calls="brk",
        cost_ns=spent, cost_share=split.share(spent))]


def _steps(view: CellView, steps) -> list[Finding]:
    shrink = max(steps, key=lambda s: s.brk_shrink_per_step)
    faulting = max(steps, key=lambda s: s.minflt_per_step)
    if shrink.brk_shrink_per_step < MIN_SHRINK_PER_STEP or shrink.shrinking_steps < MIN_SHRINKING_SHARE * shrink.steps:
        return []
    returned_pages = shrink.brk_shrink_per_step / PAGE_BYTES
    ratio = faulting.minflt_per_step / returned_pages
    if ratio < cost_mod.REFAULT_SHARE:
        return []
    brk_calls = sum(s.syscalls_per_step["brk"] for s in steps)
    evidence = [
        f"the program break moved down {mib(shrink.brk_shrink_per_step)} per step in region '{shrink.name}' "
        f"({shrink.shrinking_steps} of {shrink.steps} steps)",
        f"region '{faulting.name}' then took {faulting.minflt_per_step:,.0f} page faults per step = "
        f"{mib(faulting.minflt_per_step * PAGE_BYTES)}, {ratio:.2f}x the memory returned",
        f"region '{faulting.name}' took {faulting.wall_ns_per_step / 1e6:.2f} ms per step",
    ]
    if brk_calls:
        evidence.append(f"{brk_calls:.1f} brk calls per step inside the regions")
    # The cost per step: the re-faults and the trims, at this machine's unit costs.
    u = view.units or cost_mod.DEFAULT
    per_step = (min(faulting.minflt_per_step, returned_pages) * u.fault_ns + brk_calls * u.syscall("brk")
                + returned_pages * u.release_page_ns)
    share = per_step / faulting.wall_ns_per_step if faulting.wall_ns_per_step else 0.0
    if share < cost_mod.MATERIAL_SHARE:
        return []
    evidence.insert(0, f"the trims and re-faults cost about {per_step / 1e6:.2f} ms per step = {share:.0%} of region "
                       f"'{faulting.name}' (counts x this machine's unit costs; analysis/cost.py)")
    return [Finding(
        id="heap-trim-churn", title=f"Heap-top trimming: every step gives its memory back and faults it in again: "
                                    f"{per_step / 1e6:.2f} ms per step = {share:.0%} of the step",
        mechanism="the step's frees leave free memory at the top of the heap, free() trims it (the program break "
                  "moves down), and the next step faults that memory in again",
        evidence=evidence,
        advice="hoist the allocations out of the loop (allocate once, reuse); or keep the top: "
               "GLIBC_TUNABLES=glibc.malloc.trim_threshold=<more than the step's bytes> (or top_pad), "
               "or a fixed glibc.malloc.mmap_threshold so big buffers are mmapped instead; "
               "or an allocator that does not trim eagerly",
        subject=view.label, confidence=confidence_from_share(share),
        numbers={"shrink_bytes_per_step": shrink.brk_shrink_per_step, "faults_per_step": faulting.minflt_per_step,
                 "steps": shrink.steps, "trim_region": shrink.name, "fault_region": faulting.name},
        calls="brk", cost_ns=per_step * shrink.steps, cost_share=share)]


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
    split = view.kernel_split(sc)
    spent = split.cost("brk") + split.cost("page-faults") * view.zero_fill_share()
    if not split.material(spent):
        return []
    return [Finding(
        id="heap-trim-churn", title=f"Heap-top trimming: the program break keeps moving down and up: "
                                    f"{split.describe(spent)}",
        mechanism="free() trims the heap top and malloc grows it again, and the regrown pages are faulted in again",
        evidence=[f"{brk:,.0f} brk calls in region main{rate}, for a net growth of the break of "
                  f"{mib(max(0.0, sc.brk_delta_bytes))}: {excess:.0f}x the calls that growth needs "
                  f"(threshold {CALLS_PER_GROWTH_STEP:.0f}x)",
                  f"{sc.minflt:,.0f} page faults in region main",
                  f"the brk calls and the region's page faults cost {split.describe(spent)} (counts x this machine's "
                  "unit costs; analysis/cost.py)"],
        advice="keep the top: GLIBC_TUNABLES=glibc.malloc.trim_threshold=<larger> and/or glibc.malloc.top_pad; "
               "or reuse buffers instead of freeing them",
        subject=view.label, confidence=confidence_from_share(split.share(spent), confirmed=False),
        numbers={"brk": brk, "net_brk_growth_bytes": sc.brk_delta_bytes, "minflt": sc.minflt},
        calls="brk", cost_ns=spent, cost_share=split.share(spent))]
