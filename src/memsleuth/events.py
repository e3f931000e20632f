"""The one list of perf event names memsleuth reads, by kind.

ms-run defines the events (native/probe/ms_events.c); `ms-run --events` lists them, and
tests/e2e/test_events.py checks this module against that list, so a name changes in one place.
"""
from __future__ import annotations

SOFTWARE = ("task-clock-ns", "page-faults-minor", "page-faults-major", "context-switches", "cpu-migrations")
HARDWARE = ("cycles", "instructions", "cache-references", "cache-misses", "branch-misses",
            "L1-dcache-load-misses", "dTLB-load-misses")
SYSCALLS = ("mmap", "munmap", "madvise", "brk", "mprotect", "mremap", "futex")
# The syscalls the reports give a column each (mprotect is counted, and stays in the JSON).
SYSCALL_COLUMNS = ("mmap", "munmap", "madvise", "brk", "mremap", "futex")
# Short column names for the hardware events.
HARDWARE_SHORT = {"cycles": "cycles", "instructions": "instr", "cache-references": "cache-ref",
                  "cache-misses": "cache-miss", "branch-misses": "br-miss", "L1-dcache-load-misses": "L1d-miss",
                  "dTLB-load-misses": "dTLB-miss"}
FAULT_EVENTS = ("page-faults-minor", "page-faults-major", "context-switches")

# A mechanism that costs less than 5% of the CPU time changes no decision: run-to-run noise on
# this project's machines is 1-5% (docs/statistics.md), so a smaller cost could not even be seen
# in the timing. And at least 10 ms: rusage counts system time in scheduler ticks (4 ms at
# HZ=250), so below a few ticks the measured kernel time itself is not resolved.
MATERIAL_SHARE = 0.05
MIN_COST_NS = 10_000_000
# Below these counts in a run, a system call is housekeeping (the loader, the runtime, a final
# trim) whatever it costs: the floor of each mechanism rule (findings/), and the counts at which a
# measured cell gets an explaining run that records the calls' arguments (runner), since the
# words of those findings come from the arguments (advice, sizes, the break's moves).
MECHANISM_FLOORS = {"madvise": 10, "munmap": 100, "brk": 50, "mremap": 50}
# Below these, neither the faults nor futex can cost a material share of a run (analysis/cost.py:
# 8,000 faults at ~1.2 us are 10 ms; lock-contention's floor is 1000 futex calls): `check`'s
# explaining run then samples the CPU time only (no call sites), and says so.
FAULT_FLOOR = 8000
FUTEX_FLOOR = 1000
# And at least this many per second of wall time (a program whose threads share an uncontended lock
# makes none; 1000 a second is a queue): lock-contention's floor for a whole process.
FUTEX_RATE_FLOOR = 1000.0
# Fewer mprotect calls are set-up whatever they cost (findings/mprotect_calls.py).
MPROTECT_FLOOR = 1000
# The count from which an event can be a finding of the whole process: its call sites are then
# sampled fully (measure/where.periods), below it a few stacks only. mmap is not here: its sites say
# who maps memory (a runtime's own heap) whatever its count.
SITE_FLOORS = {"page-faults": FAULT_FLOOR, "futex": FUTEX_FLOOR, "mprotect": MPROTECT_FLOOR, **MECHANISM_FLOORS}
# And these rates (per second of wall time), where the rule has one.
SITE_RATE_FLOORS = {"futex": FUTEX_RATE_FLOOR}
# Below this peak resident memory, no memory finding speaks (findings/heap_*.py: what a process's
# resident memory is made of matters from tens of MiB): `check` then skips the heap accounting.
MEMORY_FLOOR_BYTES = 16 << 20
