"""big-blocks: 64 KiB - 64 MiB blocks, touched page by page."""
from __future__ import annotations

from memsleuth.measure.workloads.base import SEED, Param, Workload, sampling_params, size_order, size_range

TOUCH = ("pages", "ends")

WORKLOAD = Workload(
    name="big-blocks",
    program="big-blocks",
    description="each op frees a random slot's large block or mallocs one (log-uniform 64K..64M) and touches its pages",
    params=(
        Param("iterations", 1000, 1, 1 << 40, "operations per thread"),
        Param("ws", 8, 1, 1 << 20, "slots per thread"),
        *size_range(64 << 10, 64 << 20, ceiling=1 << 36, what="block"),
        Param("touch", "pages", help="pages (one write per 4 KiB) or ends (the two cookies only)", kind="choice",
              choices=TOUCH),
        Param("threads", 1, 1, 1024, "threads, each with its own slots"),
        SEED,
        *sampling_params(every=1),
    ),
    oom_exit_code=3,
    validate=size_order("big-blocks"),
    suite={"iterations": 400},
)
