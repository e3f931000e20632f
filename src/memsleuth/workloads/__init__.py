"""The built-in workloads: one module each, each a native program with a parameter schema."""
from __future__ import annotations

from memsleuth.errors import UsageError
from memsleuth.workloads.base import Param, Workload
from memsleuth.workloads.random_mixed import WORKLOAD as RANDOM_MIXED

WORKLOADS: dict[str, Workload] = {w.name: w for w in (RANDOM_MIXED,)}


def get(name: str) -> Workload:
    try:
        return WORKLOADS[name]
    except KeyError:
        raise UsageError(f"unknown workload {name!r}: known workloads are {', '.join(sorted(WORKLOADS))}") from None


__all__ = ["Param", "Workload", "WORKLOADS", "get"]
