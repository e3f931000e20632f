"""Zero-page reads: reading memory that was never written maps the kernel's shared zero page,
so a 'copy' or 'scan' reads one cached page over and over and its bandwidth looks too high."""
from __future__ import annotations

from memsleuth.units import PAGE_BYTES
from memsleuth.findings.base import Finding, confidence, mib
from memsleuth.findings.view import CellView

# At least 1 MiB worth of faults, so that the missing RSS is a clear signal.
MIN_FAULT_BYTES = 1 << 20
# Resident memory grew by less than a tenth of what the faults would have added if each had
# backed a page of its own.
MAX_RSS_PER_FAULT = 0.1
# ...and the region did not itself discard pages (madvise, munmap and a shrinking brk would also
# keep RSS flat while faults come and go).
MAX_DISCARDS_PER_FAULT = 0.1


def check(view: CellView) -> list[Finding]:
    found = []
    for sc in view.top_regions():
        if sc.minflt is None or sc.rss_growth_kb is None or sc.minflt * PAGE_BYTES < MIN_FAULT_BYTES:
            continue
        fault_bytes = sc.minflt * PAGE_BYTES
        growth = max(0.0, sc.rss_growth_kb * 1024)
        discards = sc.syscalls.get("madvise", 0) + sc.syscalls.get("munmap", 0) + sc.syscalls.get("brk", 0)
        if growth > MAX_RSS_PER_FAULT * fault_bytes or discards > MAX_DISCARDS_PER_FAULT * sc.minflt:
            continue
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
            confidence=confidence(MAX_RSS_PER_FAULT * fault_bytes / max(growth, 1.0)),
            numbers={"region": sc.name, "faults": sc.minflt, "rss_growth_bytes": growth}))
    return found
