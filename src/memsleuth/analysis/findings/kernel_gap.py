"""Kernel-time gap (a pair rule): a slower cell loses most of its difference in the kernel, so
the cause is system calls and page faults, not the allocator's own code."""
from __future__ import annotations

from memsleuth.events import SYSCALL_COLUMNS
from memsleuth.analysis.findings.base import Finding, confidence_from_margin
from memsleuth.analysis.view import CellView

# Kernel time must explain at least half of the gap in CPU time per op. (CPU time, not wall:
# with threads, kernel time adds up across them.)
GAP_SHARE = 0.5
# And the gap itself must be worth explaining: 5% of the faster cell's CPU time per op.
MIN_GAP = 0.05
# The extra kernel time must show in counted events, not only in tick-sampled system time: 1.5x
# the page faults, or at least one more syscall of a kind per 1000 ops.
FAULT_RATIO = 1.5
FAULTS_PER_KOP = 0.1
SYSCALLS_PER_KOP = 1.0
# System time is often sampled per scheduler tick (4 ms at HZ=250): below 5 ticks of it the
# split between user and system time is noise.
MIN_SYS_NS = 20_000_000
# For a command (no region main, so one "op" per run): a syscall counts as part of the gap when
# the slower cell makes 10% and at least 100 more of it per run.
RUN_CALL_RATIO = 1.1
RUN_MIN_EXTRA_CALLS = 100


def check_pair(slower: CellView, faster: CellView) -> list[Finding]:
    a, b = slower.main, faster.main
    if a is None or b is None or not a.ops or not b.ops:
        # Any command: the whole process, per run (one "op" per run).
        a, b = slower.process, faster.process
        if a is None or b is None:
            return []
        a = _per_run(a)
        b = _per_run(b)
    t_a, t_b = (a.user_ns + a.sys_ns) / a.ops, (b.user_ns + b.sys_ns) / b.ops
    gap = t_a - t_b
    if t_b <= 0 or gap <= MIN_GAP * t_b or a.sys_ns < MIN_SYS_NS:
        return []
    sys_gap = a.sys_ns / a.ops - b.sys_ns / b.ops
    share = sys_gap / gap
    if share < GAP_SHARE:
        return []
    counted = []
    for name in SYSCALL_COLUMNS:
        x, y = a.syscalls.get(name), b.syscalls.get(name)
        if x is None or y is None or x <= y:
            continue
        # Per op: one more call per 1000 ops; per run (a command): 10% and 100 calls more.
        if (a.name != "process" and (x - y) * 1000 / a.ops >= SYSCALLS_PER_KOP) or \
                (a.name == "process" and x >= RUN_CALL_RATIO * y and x - y >= RUN_MIN_EXTRA_CALLS):
            counted.append(f"{name}: {x:,.0f} vs {y:,.0f} calls")
    if (a.minflt is not None and b.minflt is not None and a.minflt > FAULT_RATIO * max(b.minflt, 1)
            and (a.minflt - b.minflt) * 1000 / a.ops >= FAULTS_PER_KOP):
        counted.append(f"page faults: {a.minflt:,.0f} vs {b.minflt:,.0f}")
    if not counted:
        return []
    unit = "run" if a.name == "process" else "op"
    fmt = (lambda ns: f"{ns / 1e6:,.1f} ms") if unit == "run" else (lambda ns: f"{ns:.1f} ns")
    evidence = [f"CPU time per {unit}: {slower.allocator} {fmt(t_a)}, {faster.allocator} {fmt(t_b)} "
                f"(gap {fmt(gap)})",
                f"system time per {unit}: {fmt(a.sys_ns / a.ops)} vs {fmt(b.sys_ns / b.ops)} = {min(share, 1):.0%} "
                "of the gap", *counted]
    return [Finding(
        id="kernel-gap", title=f"{slower.allocator} is slower mostly in the kernel",
        mechanism=f"{min(share, 1):.0%} of {slower.allocator}'s extra CPU time per {unit} over {faster.allocator} "
                  "is system time: system calls and page faults, not the allocator's own code",
        evidence=evidence,
        advice="look at the syscall and fault columns of the evidence table and at this cell's other findings for "
               "which kernel path it is",
        subject=f"{slower.label} vs {faster.label}", confidence=confidence_from_margin(share / GAP_SHARE),
        numbers={"gap_ns_per_op": gap, "sys_share_of_gap": share},
        cost_ns=sys_gap * a.ops, cost_share=sys_gap / t_a if t_a else None)]


def _per_run(sc):
    """A whole-process Scope read as one operation per run (for commands without region main)."""
    from dataclasses import replace
    return replace(sc, ops=1.0)
