"""Realloc growth churn: a buffer grown step by step (vector or string doubling, +N growth) is
moved by mremap each time it outgrows its mapping, and its new pages are faulted in; freed and
grown again, it pays it all again."""
from __future__ import annotations

from memsleuth.findings.base import Finding, confidence, kernel_share, mib, rate_per_s
from memsleuth.findings.view import CellView
from memsleuth.units import PAGE_BYTES

# At least this many mremap calls in the run: a few are a program's normal growth.
MIN_MREMAP = 50
# The faults must be worth it: a quarter of the CPU time in the kernel.
SYS_SHARE = 0.25
# And the faults must be many per call: each growth brings new pages.
FAULTS_PER_CALL = 8.0


def check(view: CellView) -> list[Finding]:
    sc = view.main or view.process
    if sc is None or sc.minflt is None or sc.syscalls.get("mremap", 0) < MIN_MREMAP:
        return []
    calls = sc.syscalls["mremap"]
    share = sc.sys_share or 0.0
    per_call = sc.minflt / calls
    if share < SYS_SHARE or per_call < FAULTS_PER_CALL:
        return []
    where = "the process" if sc.name == "process" else f"region {sc.name}"
    evidence = [f"{calls:,.0f} mremap calls in {where} ({rate_per_s(calls, sc.wall_ns):,.0f} per second)",
                f"{sc.minflt:,.0f} page faults = {mib(sc.minflt * PAGE_BYTES)}, {per_call:,.0f} per mremap call",
                kernel_share(sc, SYS_SHARE)]
    grown = view.args("mremap", "grow_bytes") if sc.name == "process" else None
    if grown:
        grows = view.args("mremap", "grow_calls") or 0
        evidence.append(f"{grows:,.0f} of them grew a mapping, by {mib(grown)} in all (the calls' arguments, "
                        "from the kernel)")
    return [Finding(
        id="mremap-churn", title="Realloc growth churn: buffers grown by mremap and faulted in again",
        mechanism="a buffer that outgrows its mapping is moved to a larger one (realloc -> mremap) and its new "
                  "pages are faulted in; freeing it and growing it again repeats the whole cost",
        evidence=evidence,
        advice="reserve the final size up front (vector::reserve, a size hint) or keep the buffer and reuse it "
               "instead of freeing and growing it again; grow geometrically rather than by a fixed step",
        subject=view.label, confidence=confidence(min(share / SYS_SHARE, per_call / FAULTS_PER_CALL)),
        numbers={"mremap": calls, "minflt": sc.minflt, "sys_share": share}, calls="mremap")]
