"""fragmentation: phases of changing size classes that keep a scattered few alive."""
from __future__ import annotations

from memsleuth.measure.workloads.base import LATENCY_EVERY, SEED, Param, Workload, size_order, size_range

WORKLOAD = Workload(
    name="fragmentation",
    program="fragmentation",
    description="phases malloc one size class, free all but every keep-th; resident memory / live heap (heap accounting)",
    params=(
        Param("phases", 24, 1, 1 << 20, "phases (each a size class, in turn)"),
        Param("count", 50_000, 1, 1 << 26, "blocks per phase"),
        *size_range(32, 4096, ceiling=1 << 24, what="size class, bytes"),
        Param("keep", 4, 1, 1 << 20, "one block in this many survives its phase"),
        Param("live-max", 64 << 20, 0, 1 << 40, "live bytes beyond which the oldest survivors are freed",
              kind="size"),
        SEED,
        Param("latency-every", LATENCY_EVERY, 0, 1 << 30, "time a random 1 in N allocator calls (0: none)"),
        Param("harness-phases", 6, 0, 1 << 20, "phases of the harness phase (0: none)"),
    ),
    oom_exit_code=3,
    validate=size_order("fragmentation"),
    suite={"phases": 16, "count": 40_000},
    heap=True,
)
