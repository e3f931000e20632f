"""threads-stress: many threads, random sizes, short, medium and long lifetimes (mstress in kind)."""
from __future__ import annotations

from memsleuth.measure.workloads.base import Param, Workload, sampling_params, size_order

WORKLOAD = Workload(
    name="threads-stress",
    program="threads-stress",
    description="T threads malloc random sizes with mixed lifetimes: 60% short, 30% medium (a FIFO), 10% long",
    params=(
        Param("iterations", 200_000, 1, 1 << 40, "mallocs per thread"),
        Param("threads", 8, 1, 1024, "threads"),
        Param("min-size", 16, 16, 1 << 30, "smallest block, bytes", kind="size"),
        Param("max-size", 4096, 16, 1 << 30, "largest block, bytes (log-uniform)", kind="size"),
        Param("medium", 64, 1, 1 << 24, "medium lifetime: blocks in the FIFO"),
        Param("long", 4096, 1, 1 << 24, "long lifetime: slots replaced at random"),
        Param("seed", 1, 0, (1 << 63) - 1, "random seed"),
        *sampling_params(),
    ),
    oom_exit_code=3,
    validate=size_order("threads-stress"),
    suite={"iterations": 100_000},
)
