"""random-mixed (seed 003): random malloc/free of 16..1024-byte blocks over a working set."""
from __future__ import annotations

from memsleuth.measure.workloads.base import SEED, Param, Workload, sampling_params, size_order, size_range


WORKLOAD = Workload(
    name="random-mixed",
    program="random-mixed",
    description="each op frees a random slot if occupied, else mallocs a random size and writes to it",
    params=(
        Param("iterations", 1_000_000, 1, 1 << 40, "operations per thread"),
        Param("ws", 400, 1, 1 << 28, "working-set slots per thread"),
        SEED,
        *size_range(16, 1024, kind="int"),
        Param("threads", 1, 1, 1024, "threads, each with its own slots"),
        Param("warmup-ops", None, 0, 1 << 40, "operations per thread before region main (default 2 x ws)"),
        *sampling_params(),
    ),
    default_sweep={"ws": (400, 4000, 10000, 40000)},
    oom_exit_code=3,
    validate=size_order("random-mixed"),
    suite={"iterations": 1_000_000, "ws": 4000},
)
