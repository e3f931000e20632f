"""Findings: rules that read measured evidence and name the mechanism it proves.

One rule per module. A rule gets a `CellView` (the evidence of one cell: its successful runs,
medians of region `main` or of the whole process, repeated step regions), a pair of them, or all
of a run's, and returns a list of findings (empty when its mechanism is not shown); the three
interfaces are `CellRule`, `PairRule` and `RunRule` in base.py. Rules fire on numbers only, never
on the name of a workload or an allocator; an allocator's name may only choose which option to
suggest. Every finding quotes the numbers it rests on and is headed by its cost (analysis/cost.py:
one materiality threshold for all). Thresholds live in each module, with the reason for their
value, and in docs/findings.md.
"""
from __future__ import annotations

from dataclasses import replace

from memsleuth.analysis.findings.base import CellRule, Finding, PairRule, RunRule
from memsleuth.analysis.view import CellView
from memsleuth.records import cpu_profile
from memsleuth.analysis import cost
from memsleuth.units import PAGE_BYTES
from memsleuth.analysis.findings import (
    allocator_time,
    counters_unavailable,
    fault_kind,
    first_touch,
    garbage_collection,
    heap_leak,
    heap_overhead,
    heap_retained,
    heap_trim,
    kernel_gap,
    kernel_time,
    lock_contention,
    madvise_storm,
    memory_calls,
    mmap_churn,
    mprotect_calls,
    mremap_churn,
    preload_missed,
    process_creation,
    thread_creation,
    rss_blowup,
    rss_growth,
    stack_growth,
    unstable,
    zero_page,
)

# Mechanism rules first; kernel_time (where the kernel time went) only speaks when none of them
# explains a cell (for_cell).
CELL_RULES: tuple[CellRule, ...] = (preload_missed, allocator_time, madvise_storm, heap_trim, mmap_churn, mremap_churn,
                                    mprotect_calls, first_touch, zero_page, fault_kind, garbage_collection,
                                    stack_growth, lock_contention, process_creation, thread_creation, memory_calls,
                                    rss_blowup, rss_growth, heap_overhead, heap_retained, heap_leak)
FALLBACK_RULES: tuple[CellRule, ...] = (kernel_time,)
PAIR_RULES: tuple[PairRule, ...] = (kernel_gap,)
RUN_RULES: tuple[RunRule, ...] = (counters_unavailable, unstable)


# Findings about the measurement, not a mechanism, and the mechanisms of user-mode time (which say
# nothing of the kernel's): they do not silence kernel_time.
NOT_MECHANISMS = ("unstable-measurement", "rss-growth", "heap-overhead", "heap-retained", "heap-leak",
                  "preload-missed", "garbage-collection", "allocator-time", "stack-growth")


# A leak goes first when the bytes it still holds at exit are at least this share of the memory the
# process faulted in: the faults' cost is then largely the leak's, and fixing it comes first.
LEAK_FIRST_SHARE = 0.5


def order(found: list[Finding], view: CellView) -> list[Finding]:
    """The costliest first (time findings by their share of the CPU time, memory ones by their
    bytes' share); a leak first where it holds most of what the process faulted in (LEAK_FIRST_SHARE)."""
    ordered = sorted(found, key=lambda f: -f.weight)
    leak = next((f for f in ordered if f.id == "heap-leak"), None)
    sc = view.process
    faulted = (sc.minflt or 0) * PAGE_BYTES if sc is not None else 0
    if leak is not None and leak.cost_bytes and faulted and leak.cost_bytes >= LEAK_FIRST_SHARE * faulted:
        ordered.remove(leak)
        held = (f"the bytes still live at exit are {leak.cost_bytes / faulted:.0%} of the {faulted / (1 << 20):,.1f} "
                "MiB the process's page faults brought in: the faults are largely the leak's memory being touched")
        ordered.insert(0, replace(leak, evidence=[*leak.evidence, held]))
    return ordered


# A finding that steps aside where another reads the same thing more exactly: resident memory that
# grows to the end ("this run does not show which" of kept data or a leak it is) beside the heap
# accounting's live heap growing to the end, with the sites that hold it (an awk script filling an
# associative array got both, the first saying the run could not tell what the second told). Only
# where the other's bytes are at least COVERS_SHARE of its own: a 1 MiB leak does not explain
# 500 MiB of resident growth, which then keeps its own finding.
SUPERSEDED_BY = {"rss-growth": "heap-leak"}
COVERS_SHARE = 0.5


# A rule whose mechanism is another where the calls' sites say the allocator makes them (malloc/free
# in the stacks): its words for that case (analysis/summary.with_call_sites).
ALLOCATOR_MADE = {"mprotect-calls": mprotect_calls.made_by_allocator}


def _superseded(f: Finding, by_id: dict[str, Finding]) -> bool:
    other = by_id.get(SUPERSEDED_BY.get(f.id, ""))
    return other is not None and (other.cost_bytes or 0) >= COVERS_SHARE * (f.cost_bytes or 0)


def for_cell(view: CellView) -> list[Finding]:
    """The cell's findings, in order (order)."""
    found = [f for rule in CELL_RULES for f in rule.check(view)]
    by_id = {f.id: f for f in found}
    found = [f for f in found if not _superseded(f, by_id)]
    if not any(f.id not in NOT_MECHANISMS for f in found):
        found += [f for rule in FALLBACK_RULES for f in rule.check(view)]
    return order(found, view)


def quiet_line(view: CellView) -> str | None:
    """When no time mechanism is material: the one line that says so, with the largest part of the
    kernel time and its share (so a clean program gets an answer, not silence). None without runs."""
    sc = view.scope
    if sc is None:
        return None
    split = view.kernel_split(sc, upper_bound=False)
    parts = {k: v for k, v in split.parts.items() if v > 0}
    where = "" if sc.name == "process" else f" in region {sc.name}"
    head = (f"No memory mechanism costs {cost.MATERIAL_SHARE:.0%} of this run's CPU time{where} "
            f"(and {cost.MIN_COST_NS / 1e6:.0f} ms) or more")
    if not parts:
        faults = sc.minflt or 0
        calls = sum(n for k, n in sc.syscalls.items() if k in cpu_profile.MEMORY_PATHS and n)
        if not faults and not calls:
            return head + f": kernel time {cost.ms(sc.sys_ns)} ms, no page faults or memory system calls counted."
        # counted, but none of the explaining run's samples fell in them: their time is below what it resolves
        return head + (f": kernel time {cost.ms(sc.sys_ns)} ms; {faults:,.0f} page faults and {calls:,.0f} memory "
                       "system calls counted, and none of the explaining run's samples fell in them.")
    top = max(parts, key=parts.get)
    if split.material(parts[top]):
        # The counted part is material, but no rule's conditions held for it: said so, never "no mechanism costs".
        head = (f"No finding names a memory mechanism here{where}, though {top} cost {cost.MATERIAL_SHARE:.0%} of the "
                "CPU time or more (no rule's conditions held for them: the tables below show them)")
    total = (f"all kernel time {cost.ms(sc.sys_ns)} ms = {(sc.sys_share or 0):.0%}"
             if sum(parts.values()) <= sc.sys_ns else
             f"rusage counted {cost.ms(sc.sys_ns)} ms of kernel time in all, less than the counts' estimate: it "
             "counts system time in scheduler ticks")
    return head + f": the largest counted part is {top}, about {split.describe(parts[top])}; {total}" + \
        _elsewhere(view) + "."


# Sampled classes that are no named system call outside the memory paths.
_NOT_A_CALL = (cpu_profile.USER, cpu_profile.OTHER, cpu_profile.UNNAMED_SYSCALL, cpu_profile.TRACING,
               cpu_profile.SAMPLER_OWN, *cpu_profile.MEMORY_PATHS)


def _elsewhere(view: CellView) -> str:
    """Where the explaining run's kernel samples went instead, when a system call that is no memory
    mechanism holds a material share of them all (a program reading files: read() copying from the
    page cache): named, so a clean memory answer does not leave the kernel time unexplained."""
    p = view.profile
    if p is None or not p.samples:
        return ""
    calls = {k: v for k, v in p.counts.items() if k not in _NOT_A_CALL}
    top = max(calls, key=calls.get, default=None)
    if top is None or calls[top] < cost.MATERIAL_SHARE * p.samples:
        return ""
    return (f"; the explaining run's samples put {calls[top] / p.samples:.0%} of the CPU time in the {top} system "
            "call, which is not a memory mechanism")


def for_pair(slower: CellView, faster: CellView) -> list[Finding]:
    return [f for rule in PAIR_RULES for f in rule.check_pair(slower, faster)]


def for_run(views: list[CellView]) -> list[Finding]:
    return [f for rule in RUN_RULES for f in rule.check_run(views)]


__all__ = ["Finding", "CellView", "for_cell", "for_pair", "for_run", "quiet_line"]
