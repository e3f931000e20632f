"""The built-in workloads: one module each, each a native program with a parameter schema."""
from __future__ import annotations

from memsleuth.errors import UsageError
from memsleuth.workloads.base import Param, Workload
from memsleuth.workloads.alloc_churn import WORKLOAD as ALLOC_CHURN
from memsleuth.workloads.cache_flush import WORKLOAD as CACHE_FLUSH
from memsleuth.workloads.first_touch import WORKLOAD as FIRST_TOUCH
from memsleuth.workloads.random_mixed import WORKLOAD as RANDOM_MIXED
from memsleuth.workloads.thread_heap import WORKLOAD as THREAD_HEAP

WORKLOADS: dict[str, Workload] = {w.name: w for w in (RANDOM_MIXED, ALLOC_CHURN, FIRST_TOUCH, THREAD_HEAP, CACHE_FLUSH)}


def get(name: str) -> Workload:
    try:
        return WORKLOADS[name]
    except KeyError:
        raise UsageError(f"unknown workload {name!r}: known workloads are {', '.join(sorted(WORKLOADS))}") from None


__all__ = ["Param", "Workload", "WORKLOADS", "get"]
