"""mprotect calls that cost material time: protections changed again and again (guard pages set and
cleared per task, memory made read-only and writable again, a JIT flipping its code pages).

Each call takes the address-space lock for writing, splits the mapping at the range's edges (or
merges it back), rewrites the range's page-table entries and flushes their TLB entries, so a call
per task or per object pays all of that every time. Who makes the calls (the program, a runtime,
the allocator) comes from their call sites (summary.with_call_sites), as for every call a finding
names.
"""
from __future__ import annotations

from memsleuth.analysis.cost import confidence_from_share
from memsleuth.analysis.findings.base import Finding, kernel_share, rate_per_s
from memsleuth.analysis.view import CellView

# Fewer calls than this are set-up whatever they cost: a thread's guard page (one call per thread
# created), the loader's RELRO, a runtime making its heap accessible as it grows.
MIN_CALLS = 1000


def check(view: CellView) -> list[Finding]:
    sc = view.scope
    if sc is None or sc.syscalls.get("mprotect", 0) < MIN_CALLS:
        return []
    calls = sc.syscalls["mprotect"]
    split = view.kernel_split(sc)
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
    return [Finding(
        id="mprotect-calls", title=f"Page protections changed again and again (mprotect): {split.describe(spent)}",
        mechanism="each mprotect call takes the address-space lock for writing, splits the mapping at the range's "
                  "edges or merges it back, rewrites the range's page-table entries and flushes their TLB entries: "
                  "protections changed per task or per object (guard pages set and cleared, memory made read-only "
                  "and writable again) pay all of it every time",
        evidence=evidence,
        advice="change protections once per region, not per use: set a guard page when a stack or buffer is created "
               "and keep it while the region is reused (a pool of ready stacks); protect or unprotect whole batches "
               "in one call",
        subject=view.label, confidence=confidence_from_share(share, confirmed=split.profile is not None),
        numbers={"mprotect": calls, "sys_share": sc.sys_share},
        calls="mprotect", cost_ns=spent, cost_share=share, phase=phase.name if phase else None)]
