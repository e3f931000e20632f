"""The built-in workloads: one module each, each a native program with a parameter schema."""
from __future__ import annotations

from memsleuth.errors import UsageError
from memsleuth.measure.workloads.base import Param, Workload
from memsleuth.measure.workloads.alloc_churn import WORKLOAD as ALLOC_CHURN
from memsleuth.measure.workloads.cache_flush import WORKLOAD as CACHE_FLUSH
from memsleuth.measure.workloads.first_touch import WORKLOAD as FIRST_TOUCH
from memsleuth.measure.workloads.random_mixed import WORKLOAD as RANDOM_MIXED
from memsleuth.measure.workloads.thread_heap import WORKLOAD as THREAD_HEAP
from memsleuth.measure.workloads.cross_thread import WORKLOAD as CROSS_THREAD
from memsleuth.measure.workloads.server import WORKLOAD as SERVER
from memsleuth.measure.workloads.false_sharing import WORKLOAD as FALSE_SHARING
from memsleuth.measure.workloads.fragmentation import WORKLOAD as FRAGMENTATION
from memsleuth.measure.workloads.big_blocks import WORKLOAD as BIG_BLOCKS
from memsleuth.measure.workloads.realloc_growth import WORKLOAD as REALLOC_GROWTH
from memsleuth.measure.workloads.threads_stress import WORKLOAD as THREADS_STRESS

# The allocator suite (compare --suite runs these, in this order), then the case studies' workloads.
# Without --reps or --target-ci, each workload runs this many interleaved rounds: enough for a
# 95% CI of the median (6 or more) and for the suite to stay under 10 minutes on 2 cores.
SUITE_REPS = 6
SUITE: tuple[Workload, ...] = (RANDOM_MIXED, CROSS_THREAD, SERVER, FALSE_SHARING, FRAGMENTATION, BIG_BLOCKS,
                               REALLOC_GROWTH, THREADS_STRESS)
WORKLOADS: dict[str, Workload] = {w.name: w for w in (*SUITE, ALLOC_CHURN, FIRST_TOUCH, THREAD_HEAP, CACHE_FLUSH)}


def get(name: str) -> Workload:
    try:
        return WORKLOADS[name]
    except KeyError:
        raise UsageError(f"unknown workload {name!r}: known workloads are {', '.join(sorted(WORKLOADS))}") from None


__all__ = ["Param", "Workload", "WORKLOADS", "SUITE", "get"]
