"""false-sharing: small blocks written hard by different threads (cache-thrash/cache-scratch in kind)."""
from __future__ import annotations

from memsleuth.measure.workloads.base import SEED, Param, Workload, sampling_params

MODES = ("active", "passive")

WORKLOAD = Workload(
    name="false-sharing",
    program="false-sharing",
    description="each thread mallocs a small block, writes it many times, frees it; passive: the first blocks come "
                "from the main thread",
    params=(
        Param("mode", "active", help="active (each thread's own blocks) or passive (first blocks handed over)",
              kind="choice", choices=MODES),
        Param("iterations", 200_000, 1, 1 << 40, "malloc-write-free rounds per thread"),
        Param("threads", 2, 1, 1024, "threads"),
        Param("size", 8, 1, 4096, "block size, bytes", kind="size"),
        Param("writes", 200, 1, 1 << 20, "byte writes per block"),
        SEED,
        *sampling_params(),
    ),
    oom_exit_code=3,
    suite={"iterations": 100_000},
)
