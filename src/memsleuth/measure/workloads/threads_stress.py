"""threads-stress: many threads, random sizes, short, medium and long lifetimes (mstress in kind)."""
from __future__ import annotations

from memsleuth.measure.workloads.base import SEED, Param, Workload, sampling_params, size_order, size_range

WORKLOAD = Workload(
    name="threads-stress",
    program="threads-stress",
    description="T threads malloc random sizes with mixed lifetimes: 60% short, 30% medium (a FIFO), 10% long",
    params=(
        Param("iterations", 200_000, 1, 1 << 40, "mallocs per thread"),
        Param("threads", 8, 1, 1024, "threads"),
        *size_range(16, 4096, spread="log-uniform"),
        Param("medium", 64, 1, 1 << 24, "medium lifetime: blocks in the FIFO"),
        Param("long", 4096, 1, 1 << 24, "long lifetime: slots replaced at random"),
        SEED,
        *sampling_params(),
    ),
    oom_exit_code=3,
    validate=size_order("threads-stress"),
    suite={"iterations": 100_000},
)
