"""Where the kernel time went: the rule that is never silent. When the kernel takes a large share
of the CPU time and no mechanism rule explains it, this says what entered the kernel (page
faults against each counted system call), with the numbers."""
from __future__ import annotations

from memsleuth.events import SYSCALL_COLUMNS
from memsleuth.findings.base import Finding, confidence, mib, rate_per_s
from memsleuth.findings.view import CellView
from memsleuth.units import PAGE_BYTES

# 30% of the CPU time in the kernel: a program that computes spends a few percent there.
SYS_SHARE = 0.30
# System time is sampled per scheduler tick (4 ms at HZ=250): below a dozen ticks it is noise.
MIN_SYS_NS = 50_000_000
# Faults "dominate" when they outnumber every counted system call together by this factor.
FAULTS_DOMINATE = 10.0


def check(view: CellView) -> list[Finding]:
    sc = view.main or view.process
    if sc is None or sc.sys_ns < MIN_SYS_NS or (sc.sys_share or 0) < SYS_SHARE:
        return []
    where = "the process" if sc.name == "process" else f"region {sc.name}"
    faults = (sc.minflt or 0) + (sc.majflt or 0)
    calls = {k: sc.syscalls[k] for k in SYSCALL_COLUMNS if sc.syscalls.get(k)}
    counted = sum(calls.values())
    evidence = [f"kernel time {sc.sys_ns / 1e6:,.0f} ms = {sc.sys_share:.0%} of {(sc.user_ns + sc.sys_ns) / 1e6:,.0f} ms "
                f"CPU time in {where} (threshold {SYS_SHARE:.0%})",
                f"page faults: {faults:,.0f} ({rate_per_s(faults, sc.wall_ns):,.0f}/s) = {mib(faults * PAGE_BYTES)}"]
    for name, n in sorted(calls.items(), key=lambda kv: -kv[1]):
        evidence.append(f"{name}: {n:,.0f} calls ({rate_per_s(n, sc.wall_ns):,.0f}/s)")
    if not sc.syscalls:
        evidence.append("system calls by name were not counted here (no tracepoints: see `memsleuth doctor`)")
    if faults and faults >= FAULTS_DOMINATE * max(counted, 1):
        culprit, mechanism = "page faults", (f"the kernel entries are mostly page faults ({faults:,.0f}, "
                                             f"{faults / max(counted, 1):,.0f}x the counted system calls): memory "
                                             "is being faulted in, first touched or touched again after it was "
                                             "given back")
    elif calls:
        top = max(calls, key=calls.get)
        culprit, mechanism = top, (f"the most frequent counted system call is {top} ({calls[top]:,.0f}); page "
                                   f"faults number {faults:,.0f}")
    else:
        culprit, mechanism = "unknown", "neither page faults nor the counted system calls account for it"
    return [Finding(
        id="kernel-time", title=f"{sc.sys_share:.0%} of the CPU time is in the kernel",
        mechanism=mechanism + " (counts, not timings: each kind's cost per entry is not measured)",
        evidence=evidence,
        advice="see the findings above for the mechanism where one is named; otherwise the fault and system call "
               "counts say which kernel path to look at (perf record -g on the program shows the call sites)",
        subject=view.label, confidence=confidence(sc.sys_share / SYS_SHARE),
        numbers={"sys_share": sc.sys_share, "faults": faults, "syscalls": calls, "culprit": culprit},
        calls=culprit if culprit in SYSCALL_COLUMNS else None)]
