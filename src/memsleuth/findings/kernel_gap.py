"""Kernel-time gap (a pair rule): a slower cell loses most of its difference in the kernel, so
the cause is system calls and page faults, not the allocator's own code."""
from __future__ import annotations

from memsleuth.findings.base import Finding, confidence
from memsleuth.findings.view import CellView

# Kernel time must explain at least half of the time-per-op gap.
GAP_SHARE = 0.5
# And the gap itself must be worth explaining: 5% of the faster cell's time per op.
MIN_GAP = 0.05


def check_pair(slower: CellView, faster: CellView) -> Finding | None:
    a, b = slower.main, faster.main
    if a is None or b is None or not a.ops or not b.ops:
        return None
    t_a, t_b = a.wall_ns / a.ops, b.wall_ns / b.ops
    gap = t_a - t_b
    if gap <= MIN_GAP * t_b:
        return None
    sys_gap = a.sys_ns / a.ops - b.sys_ns / b.ops
    share = sys_gap / gap
    if share < GAP_SHARE:
        return None
    evidence = [f"{slower.allocator}: {t_a:.1f} ns/op, {faster.allocator}: {t_b:.1f} ns/op (gap {gap:.1f} ns/op)",
                f"system time per op: {a.sys_ns / a.ops:.1f} vs {b.sys_ns / b.ops:.1f} ns = {share:.0%} of the gap"]
    for name in ("madvise", "munmap", "mmap", "brk", "futex"):
        x, y = a.syscalls.get(name), b.syscalls.get(name)
        if x is not None and y is not None and x > y + 10:
            evidence.append(f"{name}: {x:,.0f} vs {y:,.0f} calls")
    if a.minflt is not None and b.minflt is not None and a.minflt > 1.5 * b.minflt:
        evidence.append(f"page faults: {a.minflt:,.0f} vs {b.minflt:,.0f}")
    return Finding(
        id="kernel-gap", title=f"{slower.allocator} is slower mostly in the kernel",
        mechanism=f"{share:.0%} of {slower.allocator}'s extra time per operation over {faster.allocator} is "
                  "system time: system calls and page faults, not the allocator's own code",
        evidence=evidence,
        advice="look at the syscall and fault columns of the evidence table and at this cell's other findings for "
               "which kernel path it is",
        subject=f"{slower.label} vs {faster.label}", confidence=confidence(share / GAP_SHARE),
        numbers={"gap_ns_per_op": gap, "sys_share_of_gap": share})
