"""Counters unavailable: which evidence this machine could not give, and which questions it
would have answered."""
from __future__ import annotations

from memsleuth.events import FAULT_EVENTS, HARDWARE as HARDWARE_EVENTS, SYSCALLS
from memsleuth.analysis.findings.base import Finding
from memsleuth.analysis.view import CellView

WOULD_ANSWER = {
    "hardware": "whether a slower allocator executes more instructions or stalls on cache and TLB misses (IPC, "
                "cache-misses, dTLB-load-misses)",
    "syscalls": "which system calls the time went to: madvise storms, mmap/munmap churn, brk trimming, futex "
                "waits (the madvise-storm, heap-trim-churn, mmap-churn and lock-contention rules need them)",
    "software": "how many page faults and context switches each region took (first-touch, zero-page and "
                "contention rules need them)",
}
# What makes each kind open: the advice names only the kinds that did not.
TO_OPEN = {
    "hardware": "hardware counters need a PMU (bare metal, or a VM that passes one through)",
    "syscalls": "syscall tracepoints need root (or perf_event_paranoid <= -1) and tracefs",
    "software": "software events need perf_event_open allowed to this user (perf_event_paranoid <= 2, and no "
                "seccomp profile refusing it)",
}


def check_run(views: list[CellView]) -> list[Finding]:
    unsupported: dict[str, str] = {}
    for v in views:
        unsupported.update(v.unsupported)
    if not unsupported:
        return []
    groups = {
        "hardware": [e for e in HARDWARE_EVENTS if e in unsupported],
        "syscalls": [e for e in SYSCALLS if e in unsupported],
        "software": [e for e in FAULT_EVENTS if e in unsupported],
    }
    evidence, missing = [], []
    for kind, events in groups.items():
        if not events:
            continue
        missing.append(kind)
        why = unsupported[events[0]]
        evidence.append(f"{kind}: {', '.join(events)} did not open ({why}); they would have shown {WOULD_ANSWER[kind]}")
    if not evidence:
        return []
    return [Finding(
        id="counters-unavailable", title="Some evidence could not be measured on this machine",
        mechanism="the kernel refused these perf events, so the findings that need them cannot be checked here",
        evidence=evidence,
        advice="; ".join(TO_OPEN[k] for k in missing) + "; see `memsleuth doctor`",
        confidence="high", subject="machine", numbers={"missing": missing})]
