"""server: threads replace random objects in a shared table (larson in kind)."""
from __future__ import annotations

from memsleuth.measure.workloads.base import SEED, Param, Workload, sampling_params, size_order, size_range

WORKLOAD = Workload(
    name="server",
    program="server",
    description="T threads replace random blocks of one shared table: most blocks are freed by another thread",
    params=(
        Param("iterations", 500_000, 1, 1 << 40, "replacements per thread"),
        Param("threads", 2, 1, 1024, "threads"),
        Param("slots", 4000, 1, 1 << 28, "blocks in the shared table"),
        *size_range(32, 512, floor=24, spread="log-uniform"),
        SEED,
        *sampling_params(),
    ),
    oom_exit_code=3,
    validate=size_order("server"),
    suite={"iterations": 300_000},
)
