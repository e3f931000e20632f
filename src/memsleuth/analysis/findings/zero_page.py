"""Zero-page reads: reading memory that was never written maps the kernel's shared zero page,
so a 'copy' or 'scan' reads one cached page over and over and its bandwidth looks too high."""
from __future__ import annotations

from memsleuth.units import PAGE_BYTES
from memsleuth.analysis.findings.base import Finding, mib
from memsleuth.analysis.cost import confidence_from_share
from memsleuth.analysis.view import CellView

# At least 1 MiB worth of faults, so that the missing RSS is a clear signal.
MIN_FAULT_BYTES = 1 << 20
# Resident memory grew by less than a tenth of what the faults would have added if each had
# backed a page of its own.
MAX_RSS_PER_FAULT = 0.1
# ...and the region did not itself discard pages (madvise, munmap and a shrinking brk would also
# keep RSS flat while faults come and go).
MAX_DISCARDS_PER_FAULT = 0.1


# Whole process (no regions): at least this much faulted, and the peak resident memory below
# MAX_RSS_PER_FAULT of it, with the memory given back (munmap, purging madvise, the break's moves
# down: the calls' arguments) under MAX_DISCARDS_PER_FAULT of the faulted bytes too, since memory
# given back and faulted again also leaves RSS below the faults.
MIN_PROCESS_FAULT_BYTES = 64 << 20
# Where the faults are traced by address, at least this share of them must read a page that was
# missing and never given back before (a zero-page read is a read of never-written memory).
MIN_READ_SHARE = 0.5
# The calls that give pages back: where any of them was not counted or recorded, the rule is silent.
RELEASING_CALLS = ("madvise", "munmap", "brk")


def _process(view: CellView) -> list[Finding]:
    sc = view.process
    if sc is None or sc.minflt is None or view.maxrss_kb is None or view.processes > 1:
        return []   # a tree's summed faults against one process's peak say nothing of the zero page
    fault_bytes = sc.minflt * PAGE_BYTES
    resident = view.maxrss_kb * 1024
    if fault_bytes < MIN_PROCESS_FAULT_BYTES or resident > MAX_RSS_PER_FAULT * fault_bytes:
        return []
    trace = view.traced_for(sc)
    reads = view.fault_causes(sc)[0]["none"] * trace.read_share("none") if trace is not None else None
    if reads is not None and reads < MIN_READ_SHARE:
        return []   # the faults' own kinds say otherwise: writes, or memory given back and touched again
    released = view.released_bytes(sc)
    if not view.releases_recorded():
        return []   # without every releasing call's arguments, memory given back cannot be told from the zero page
    given_back = sum(released.values())
    if given_back > MAX_DISCARDS_PER_FAULT * fault_bytes:
        return []
    split = view.kernel_split(sc)
    spent = split.cost("page-faults") * view.zero_fill_share()   # a zero-page read is a zero-fill fault
    if not split.material(spent):
        return []
    return [Finding(
        id="zero-page-read", title=f"The program read {mib(fault_bytes)} of memory it never wrote (the zero page): "
                                   f"{split.describe(spent)}",
        mechanism="reads of never-written anonymous memory fault in the kernel's shared zero page instead of a page "
                  "of their own: the faults add no resident memory, and whatever is read is one cached 4 KiB page of "
                  "zeros (a bandwidth measured over it is higher than real memory gives)",
        evidence=[f"{sc.minflt:,.0f} page faults = {mib(fault_bytes)} worth of pages, costing about "
                  f"{split.describe(spent)}",
                  f"peak RSS only {mib(resident)} = {resident / fault_bytes:.1%} of that (threshold "
                  f"{MAX_RSS_PER_FAULT:.0%})",
                  f"memory given back to the kernel (munmap, purging madvise, the break moving down): "
                  f"{mib(given_back)} = {given_back / fault_bytes:.1%} of the faulted bytes (threshold "
                  f"{MAX_DISCARDS_PER_FAULT:.0%}; the calls' arguments): the faults are not re-faults of memory "
                  "given back",
                  *([f"{reads:.0%} of {trace.records():,.0f} sampled page faults read a missing page that nothing gave "
                     f"back before (threshold {MIN_READ_SHARE:.0%})"] if reads is not None else [])],
        advice="write the memory before reading it (or do not read what was never written: calloc'd memory that is "
               "only read is all zeros); treat any bandwidth measured over it as invalid",
        subject=view.label, confidence=confidence_from_share(split.share(spent)),
        numbers={"faults": sc.minflt, "peak_rss_bytes": resident, "given_back_bytes": given_back},
        cost_ns=spent, cost_share=split.share(spent))]


def check(view: CellView) -> list[Finding]:
    if not view.samples or not any(s.regions for s in view.samples):
        return _process(view)
    found = []
    for sc in view.top_regions():
        if sc.minflt is None or sc.rss_growth_kb is None or sc.minflt * PAGE_BYTES < MIN_FAULT_BYTES:
            continue
        fault_bytes = sc.minflt * PAGE_BYTES
        growth = max(0.0, sc.rss_growth_kb * 1024)
        if not all(k in sc.syscalls for k in RELEASING_CALLS):
            continue    # the calls that discard pages were not counted (no tracepoints): nothing rules them out
        discards = sum(sc.syscalls[k] for k in RELEASING_CALLS)
        if growth > MAX_RSS_PER_FAULT * fault_bytes or discards > MAX_DISCARDS_PER_FAULT * sc.minflt:
            continue
        split = view.kernel_split(sc)
        found.append(Finding(
            id="zero-page-read", title=f"Region '{sc.name}' read memory that was never written (the zero page)",
            mechanism="reads of never-written anonymous memory fault in the kernel's shared zero page instead of "
                      "a page of their own, so they all read one cached 4 KiB page: a bandwidth measured over it "
                      "would be higher than real memory gives",
            evidence=[f"{sc.minflt:,.0f} page faults in region '{sc.name}' ({mib(fault_bytes)} worth of pages)",
                      f"resident memory grew only {mib(growth)} ({growth / fault_bytes:.1%} of that; "
                      f"threshold {MAX_RSS_PER_FAULT:.0%})",
                      f"{discards:,.0f} madvise/munmap/brk calls in the region: the pages were not discarded"],
            advice="write the source buffer before reading it (memset or fill it with real data) so that reads hit "
                   "real memory; treat any bandwidth measured on it so far as invalid",
            subject=f"{view.label} / {sc.name}",
            confidence="high" if growth <= MAX_RSS_PER_FAULT * fault_bytes / 3 else "medium",
            numbers={"region": sc.name, "faults": sc.minflt, "rss_growth_bytes": growth},
            cost_ns=split.cost("page-faults"), cost_share=split.share(split.cost("page-faults"))))
    return found
