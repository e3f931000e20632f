"""First-touch faults in a timed region (seed 001): fresh memory is not backed until it is
first written, so the region pays one page fault per page inside its own timing."""
from __future__ import annotations

from memsleuth.units import HUGE_PAGE_BYTES, PAGE_BYTES
from memsleuth.analysis.findings.base import Finding, mib
from memsleuth.analysis.cost import confidence_from_share
from memsleuth.analysis.view import HUGE_WORDS_SHARE, ZERO_FILL, CellView
from memsleuth.records.cpu_profile import FAULT, when_key

# At least 1 MiB first-touched: below that the faults cost well under a millisecond.
MIN_FAULT_BYTES = 1 << 20
# The faults' cost (count x this machine's fault cost, analysis/cost.py) must be material: the one
# threshold of every finding (cost.MATERIAL_SHARE of the CPU time, cost.MIN_COST_NS).
# The faults must add resident memory (else they mapped the zero page: zero_page.py).
MIN_RSS_PER_FAULT = 0.5
# The kernel time must be the faults', not system calls': more counted syscalls than faults in
# the region (futex waits, madvise) means the system time has another owner.
MAX_SYSCALLS_PER_FAULT = 1.0


# Whole process (no regions): a first-touch ramp is at least this much memory faulted in, most of
# which stays resident (peak RSS at least this share of the faulted bytes: not re-faults), with
# the kernel time above.
MIN_PROCESS_FAULT_BYTES = 64 << 20
HUGE_PAGES = " (here mostly whole 2 MiB huge pages, each zeroed)"
MIN_RESIDENT_SHARE = 0.5


def _process(view: CellView) -> list[Finding]:
    sc = view.process
    if sc is None or sc.minflt is None or view.maxrss_kb is None:
        return []
    share = sc.sys_share or 0.0
    resident = view.maxrss_kb * 1024
    split = view.kernel_split(sc)
    trace = view.traced_for(sc)
    tree = view.processes > 1
    # Where most of the faults' time zeroed whole 2 MiB pages, a fault is up to 512 small pages: a Rust
    # program on mimalloc, its arena asked for huge pages, took 266 faults (573 ms) read as 1 MiB, under
    # the floor, and got no finding. Then the faulted bytes are at most a huge page each and at most the
    # peak RSS (what stayed resident says how much was faulted in).
    huge = view.huge_fill_share() >= HUGE_WORDS_SHARE
    if trace is not None:
        # The faults' addresses say which were first touches: nothing gave their memory back before,
        # and they wrote it (a read of never-written memory maps the zero page: zero_page.py).
        first = min(view.fault_causes(sc)[0]["none"] * trace.write_share("none"), view.zero_fill_share())
        first = max(0.0, first - view.growth_fault_share(sc, split))   # realloc growth's: mremap-churn's
        spent = split.cost("page-faults") * first
        proof = (f"{first:.0%} of the sampled page faults write memory that nothing gave back before them (each "
                 "address looked up in the ranges released by munmap, a purging madvise or the break moving down, "
                 "and in mappings munmap gave back later): first touches")
    elif tree:
        return []   # the tree's faults against one process's peak say nothing of first touches
    else:
        first = max(0.0, view.zero_fill_share() - view.growth_fault_share(sc, split))
        least = sc.minflt * PAGE_BYTES * first     # a page each, the least they faulted in (huge pages: more)
        spent = split.cost("page-faults") * first
        proof = (f"peak RSS {mib(resident)} = {resident / least:.0%} of the faulted bytes at a page each (threshold "
                 f"{MIN_RESIDENT_SHARE:.0%}): most of the faulted memory stayed resident, so most faults were first "
                 "touches rather than memory given back and touched again") if least else ""
        if resident < MIN_RESIDENT_SHARE * least:
            return []
    fault_bytes = sc.minflt * first * PAGE_BYTES
    if huge:
        fault_bytes = max(fault_bytes, min(sc.minflt * first * HUGE_PAGE_BYTES, resident))
    if fault_bytes < MIN_PROCESS_FAULT_BYTES or not split.material(spent):
        return []
    per_exe = view.fault_executables()
    top = per_exe[0] if per_exe and per_exe[0][2] >= 0.5 else None
    counted = (f"{sc.minflt:,.0f} page faults in the process tree, most of their time zeroing whole 2 MiB huge pages: "
               f"{mib(fault_bytes)} of them first touches (at most one huge page each, at most the peak RSS)" if huge else
               f"{sc.minflt:,.0f} page faults in the process tree, {mib(fault_bytes)} of them first touches if each "
               "was one page")
    evidence = [f"{counted}, costing about {split.describe(spent)} (analysis/cost.py)", proof,
                f"{share:.0%} of the CPU time was in the kernel ({sc.sys_ns / 1e6:,.0f} of "
                f"{(sc.user_ns + sc.sys_ns) / 1e6:,.0f} ms)"]
    if len(per_exe) > 1 or (top and top[1] > 1):
        evidence.append("page-fault time by executable (sampled): " + ", ".join(
            f"{name} ({n:,} process{'es' if n > 1 else ''}) {s:.0%}" for name, n, s in per_exe[:4]))
    t = view.median_sample.timeline if view.median_sample else None
    rss, times = (t.column("rss_kb"), t.times_ms) if t else (None, None)
    if rss and len(rss) >= 3:
        half = next((i for i, v in enumerate(rss) if v >= max(rss) / 2), 0)
        evidence.append(f"RSS reached half its peak at {times[half] / 1000:.2f} s of {times[-1] / 1000:.2f} s (timeline)")
    # first touches: faults on memory nothing gave back, a fresh mapping's among them
    phase = view.phase(when_key(FAULT, release="none"), when_key(FAULT, release="mapped")) if trace is not None else \
        view.phase(*(when_key(FAULT, k) for k in ZERO_FILL))
    if phase:
        evidence.append(phase.text)
    cost_share = split.share(spent)
    if huge:
        evidence.append(f"{view.huge_fill_share():.0%} of these faults' sampled time zero-filled a whole 2 MiB huge "
                        "page (the kernel chain: transparent huge pages)")
    who = "the program pays"
    if tree and top and top[1] > 1:
        each = fault_bytes * top[2] / top[1]
        who = f"{top[1]:,} processes of {top[0]} pay, each faulting in about {mib(each)},"
    return [Finding(
        id="first-touch", title=f"First-touch faults: {mib(fault_bytes)} of fresh memory faulted in: "
                                f"{split.describe(spent)}",
        mechanism=f"memory fresh from malloc/mmap is not backed by pages until first written, so {who} "
                  f"a page fault per page{HUGE_PAGES if huge else ''} as it first touches it, "
                  f"and {share:.0%} of its time is the kernel's",
        evidence=evidence,
        advice=HUGE_ADVICE if huge else
        "if that time is inside what you measure, touch the memory first (memset, MADV_POPULATE_WRITE, "
        "MAP_POPULATE) or use huge pages (MADV_HUGEPAGE); if it is the program's preparation, it belongs there",
        subject=view.label, confidence=confidence_from_share(cost_share),
        numbers={"faults": sc.minflt, "fault_bytes": fault_bytes, "peak_rss_bytes": resident, "sys_share": share},
        cost_ns=spent, cost_share=cost_share, phase=phase.name if phase else None)]


def check(view: CellView) -> list[Finding]:
    if not view.samples or not any(s.regions for s in view.samples):
        return _process(view)
    found = []
    for sc in view.top_regions():
        if sc.minflt is None or sc.minflt * PAGE_BYTES < MIN_FAULT_BYTES:
            continue
        share = sc.sys_share or 0.0
        split = view.kernel_split(sc)
        # the faults of fresh memory only, less realloc growth's (mremap-churn's)
        spent = split.cost("page-faults") * max(0.0, view.zero_fill_share() - view.growth_fault_share(sc, split))
        if not split.material(spent):
            continue
        fault_bytes = sc.minflt * PAGE_BYTES
        if sc.rss_growth_kb is not None and sc.rss_growth_kb * 1024 < MIN_RSS_PER_FAULT * fault_bytes:
            continue
        if sum(sc.syscalls.values()) > MAX_SYSCALLS_PER_FAULT * sc.minflt:
            continue
        evidence = [f"region '{sc.name}' took {sc.minflt:,.0f} page faults = {mib(fault_bytes)} first-touched "
                    f"(threshold {mib(MIN_FAULT_BYTES)}), costing about {split.describe(spent)} "
                    f"({split.units.fault_ns:,.0f} ns per fault on this machine)",
                    f"{share:.0%} of its CPU time was in the kernel ({sc.sys_ns / 1e6:.1f} of "
                    f"{(sc.user_ns + sc.sys_ns) / 1e6:.1f} ms)"]
        if sc.rss_growth_kb is not None:
            evidence.append(f"resident memory grew {mib(sc.rss_growth_kb * 1024)} during the region")
        if sc.ops and 0.8 <= fault_bytes / sc.ops <= 1.25:
            evidence.append(f"the faulted bytes are within 25% of the region's {sc.ops:,.0f} ops: if those are "
                            "bytes, every one of them was touched for the first time here")
        found.append(Finding(
            id="first-touch", title=f"Region '{sc.name}' took {sc.minflt:,.0f} page faults "
                                    f"({mib(fault_bytes)} first-touched)",
            mechanism="memory fresh from malloc/mmap is not backed by pages until first written, so this region "
                      f"pays a page fault per 4 KiB page and {share:.0%} of its time is the kernel's",
            evidence=evidence,
            advice="if this region's time is your result: touch the memory before it (memset, MADV_POPULATE_WRITE "
                   "or MAP_POPULATE) in a region of its own, or use huge pages (MADV_HUGEPAGE) to fault 512x fewer "
                   "times; if the region is that preparation, this is where the faults belong",
            subject=f"{view.label} / {sc.name}", confidence=confidence_from_share(split.share(spent)),
            numbers={"region": sc.name, "faults": sc.minflt, "fault_bytes": fault_bytes, "sys_share": share},
            cost_ns=spent, cost_share=split.share(spent)))
    return found


# Where the faults zero whole huge pages, asking for huge pages is what costs: the advice is the reverse.
HUGE_ADVICE = ("these faults zero whole 2 MiB huge pages: if the memory is touched sparsely (a few bytes per 2 MiB), "
               "leave huge pages off for it (no MADV_HUGEPAGE, or MADV_NOHUGEPAGE on that range) so that only the "
               "4 KiB pages used are zeroed; if it is touched whole, touch it first (MADV_POPULATE_WRITE) outside "
               "what you measure")
