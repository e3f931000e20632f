"""cross-thread: producer threads allocate, consumer threads free (xmalloc-test in kind)."""
from __future__ import annotations

from memsleuth.measure.workloads.base import SEED, Param, Workload, sampling_params, size_order, size_range

WORKLOAD = Workload(
    name="cross-thread",
    program="cross-thread",
    description="T producer threads malloc blocks and pass them through rings to T consumer threads, which free them",
    params=(
        Param("iterations", 1_000_000, 1, 1 << 40, "blocks per producer"),
        Param("threads", 1, 1, 512, "producer-consumer pairs (2 threads each)"),
        *size_range(16, 256, spread="sizes are log-uniform"),
        Param("queue", 256, 1, 1 << 24, "ring entries between a producer and its consumer"),
        SEED,
        *sampling_params(),
    ),
    oom_exit_code=3,
    validate=size_order("cross-thread"),
    suite={"iterations": 300_000},
)
