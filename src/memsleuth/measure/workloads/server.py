"""server: threads replace random objects in a shared table (larson in kind)."""
from __future__ import annotations

from memsleuth.measure.workloads.base import Param, Workload, sampling_params, size_order

WORKLOAD = Workload(
    name="server",
    program="server",
    description="T threads replace random blocks of one shared table: most blocks are freed by another thread",
    params=(
        Param("iterations", 500_000, 1, 1 << 40, "replacements per thread"),
        Param("threads", 2, 1, 1024, "threads"),
        Param("slots", 4000, 1, 1 << 28, "blocks in the shared table"),
        Param("min-size", 32, 24, 1 << 30, "smallest block, bytes", kind="size"),
        Param("max-size", 512, 24, 1 << 30, "largest block, bytes (log-uniform)", kind="size"),
        Param("seed", 1, 0, (1 << 63) - 1, "random seed"),
        *sampling_params(),
    ),
    oom_exit_code=3,
    validate=size_order("server"),
    suite={"iterations": 300_000},
)
