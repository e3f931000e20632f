"""Allocator lock contention: threads wait for each other inside malloc/free (futex sleeps and
context switches), typically one lock shared by all threads."""
from __future__ import annotations

from memsleuth.analysis.findings.base import Finding, confidence_from_margin
from memsleuth.analysis.findings.thread_creation import threads_made
from memsleuth.analysis.view import CellView
from memsleuth.events import FUTEX_FLOOR, FUTEX_RATE_FLOOR

# futex is only entered when a lock is contended (the uncontended path stays in user space):
# one call per 2000 operations is already a queue. glibc (per-thread arenas) and mimalloc
# (thread-local heaps) make at most a couple in all in random-mixed with 2 threads on this
# project's machine. Context switches are reported but not required: with as many threads as
# cores, most contended waits end by spinning or an immediate wake, not a sleep.
FUTEX_PER_KOP = 0.5


# Whole process (no region main): futex calls per second of wall time, and in all (events.py).
FUTEX_PER_S = FUTEX_RATE_FLOOR
MIN_FUTEX = FUTEX_FLOOR      # the floor under which check makes no explaining run either (events.py)
# Joining a thread waits on a futex once, and the thread's exit wakes it from the kernel: a program
# that makes a thread per task makes about one futex call per thread without any lock. Futex calls
# up to this many per task created (processes and threads the machine made during the run, a bound
# of the program's own) are the joins.
JOIN_FUTEX_PER_TASK = 2.0


def title(cost: str) -> str:
    """Headed by what the futex calls themselves cost, as every finding is by its cost; the waiting is
    not CPU time, and not in it."""
    return f"Lock contention: threads wait for each other in the kernel (futex); the calls themselves {cost}"


def _process(view: CellView) -> list[Finding]:
    sc = view.process
    if sc is None or sc.syscalls["futex"] < MIN_FUTEX or not sc.wall_ns:
        return []
    futex = sc.syscalls["futex"]
    per_s = futex / (sc.wall_ns / 1e9)
    if per_s < FUTEX_PER_S:
        return []
    cpu = sc.user_ns + sc.sys_ns
    split = view.kernel_split(sc)
    spent = split.cost("futex")
    tasks = view.tasks_created_bound
    if threads_made(view) is not None and (not split.material(spent)
                                           or (tasks is not None and futex <= JOIN_FUTEX_PER_TASK * tasks)):
        # a thread per task: joining one waits on a futex until it ends, a wait for a thread, not a lock;
        # the creation is thread_creation's finding
        return []
    evidence = [f"{futex:,.0f} futex calls = {per_s:,.0f} per second (threshold {FUTEX_PER_S:,.0f}); the calls "
                f"themselves cost about {split.describe(spent)}, the time threads spend waiting is not CPU time and "
                "is not measured",
                f"CPU time {cpu / 1e6:,.0f} ms in {sc.wall_ns / 1e6:,.0f} ms of wall time, "
                f"{(sc.sys_share or 0):.0%} of it in the kernel"]
    if sc.context_switches is not None:
        evidence.append(f"{sc.context_switches:,.0f} context switches")
    return [Finding(
        id="lock-contention", title=title(split.describe(spent)),
        mechanism="threads collide on a lock and enter the kernel (futex) to wait for it or to wake a waiter: an "
                  "uncontended lock never makes that call",
        evidence=evidence,
        advice="if the program's own lock: shorten what it guards, or give each thread its own (a per-thread pool, "
               "thread_local); if the allocator's: an allocator with thread-local caches (mimalloc, jemalloc, "
               "tcmalloc), or under glibc more arenas (glibc.malloc.arena_max) where the threads outnumber them (by "
               "default 8 per core)",
        subject=view.label, confidence=confidence_from_margin(per_s / FUTEX_PER_S),
        numbers={"futex": futex, "futex_per_s": per_s}, calls="futex", cost_ns=spent, cost_share=split.share(spent))]


def check(view: CellView) -> list[Finding]:
    sc = view.main
    if sc is None:
        return _process(view)
    if not sc.ops or "futex" not in sc.syscalls:
        return []
    futex = sc.per_kop(sc.syscalls["futex"])
    if futex < FUTEX_PER_KOP:
        return []
    csw = sc.per_kop(sc.context_switches) if sc.context_switches is not None else None
    share = sc.sys_share
    split = view.kernel_split(sc)
    spent = split.cost("futex")
    return [Finding(
        id="lock-contention", title=title(split.describe(spent)),
        mechanism="threads collide on a lock and enter the kernel (futex) to wait for it or to wake a waiter: an "
                  "uncontended lock never makes that call",
        evidence=[f"{sc.syscalls['futex']:,.0f} futex calls in region main = {futex:.2f} per 1000 ops "
                  f"(threshold {FUTEX_PER_KOP})"]
                 + ([f"{sc.context_switches:,.0f} context switches = {csw:.2f} per 1000 ops"] if csw is not None else [])
                 + ([f"{share:.0%} of CPU time in the kernel"] if share is not None else []),
        advice="use an allocator with thread-local caches (mimalloc, jemalloc, tcmalloc); for glibc raise "
               "glibc.malloc.arena_max where the threads outnumber its arenas (by default 8 per core), keep "
               "glibc.malloc.tcache_count up; in the program reuse per-thread buffers "
               "(thread_local) instead of allocating in the hot loop",
        subject=view.label, confidence=confidence_from_margin(futex / FUTEX_PER_KOP),
        numbers={"futex_per_kop": futex, "csw_per_kop": csw}, calls="futex",
        cost_ns=spent, cost_share=split.share(spent))]
