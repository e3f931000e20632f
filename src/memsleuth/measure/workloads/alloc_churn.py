"""alloc-churn (seed 000): a step loop that allocates, initialises, computes on and frees buffers."""
from __future__ import annotations

from memsleuth.measure.workloads.base import Param, Workload

VARIANTS = ("free-all", "leak-last", "hoisted", "target-first-touch")

WORKLOAD = Workload(
    name="alloc-churn",
    program="alloc-churn",
    description="per step: malloc buffers and a small one last, init, target, free (regions init/target/free)",
    params=(
        Param("steps", 10, 1, 1 << 32, "steps of the loop"),
        Param("nbuf", 8, 1, 4096, "large buffers per step"),
        Param("sizes", "4194304", 64, 1 << 36, "buffer sizes, cycled over the buffers (like 4M or 4M,1M)",
              sweepable=False, kind="sizes"),
        Param("small", 800, 1, 1 << 30, "the small buffer allocated last, bytes", kind="size"),
        Param("variant", "free-all", help="free-all, leak-last, hoisted or target-first-touch", kind="choice",
              choices=VARIANTS),
    ),
    oom_exit_code=3,
)
