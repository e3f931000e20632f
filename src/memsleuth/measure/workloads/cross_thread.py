"""cross-thread: producer threads allocate, consumer threads free (xmalloc-test in kind)."""
from __future__ import annotations

from memsleuth.measure.workloads.base import Param, Workload, sampling_params, size_order

WORKLOAD = Workload(
    name="cross-thread",
    program="cross-thread",
    description="T producer threads malloc blocks and pass them through rings to T consumer threads, which free them",
    params=(
        Param("iterations", 1_000_000, 1, 1 << 40, "blocks per producer"),
        Param("threads", 1, 1, 512, "producer-consumer pairs (2 threads each)"),
        Param("min-size", 16, 16, 1 << 30, "smallest block, bytes", kind="size"),
        Param("max-size", 256, 16, 1 << 30, "largest block, bytes (sizes are log-uniform)", kind="size"),
        Param("queue", 256, 1, 1 << 24, "ring entries between a producer and its consumer"),
        Param("seed", 1, 0, (1 << 63) - 1, "random seed"),
        *sampling_params(),
    ),
    oom_exit_code=3,
    validate=size_order("cross-thread"),
    suite={"iterations": 300_000},
)
