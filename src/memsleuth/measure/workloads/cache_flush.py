"""cache-flush (seed 004): bandwidth of flush, write-back and fill primitives, fenced."""
from __future__ import annotations

from memsleuth.measure.workloads.base import Param, Workload

OPS = ("clflush", "clflushopt", "clwb", "memset", "nt-store")

WORKLOAD = Workload(
    name="cache-flush",
    program="cache-flush",
    description="one primitive over a buffer, timed per pass in region op (instructions CPUID lacks never run)",
    params=(
        Param("op", "memset", help=", ".join(OPS), kind="choice", choices=OPS),
        Param("bytes", 128 << 20, 4096, 1 << 40, "buffer size", kind="size"),
        Param("passes", 8, 1, 1_000_000, "timed passes per run"),
        Param("dirty", 1, 0, 1, "1: write the buffer before each flush pass (outside the timed region)"),
    ),
    oom_exit_code=3,
)
