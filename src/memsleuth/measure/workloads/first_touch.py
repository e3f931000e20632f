"""first-touch (seed 001): a timed memcpy after different ways of preparing the memory."""
from __future__ import annotations

from memsleuth.measure.workloads.base import Param, Workload

SETUPS = ("fresh", "src-written", "prefaulted", "populate", "hugepage", "populate-write")

WORKLOAD = Workload(
    name="first-touch",
    program="first-touch",
    description="memcpy of N bytes (regions setup, copy, copy-again) after one of six setups",
    params=(
        Param("bytes", 1 << 30, 4096, 1 << 40, "bytes copied", kind="size"),
        Param("setup", "prefaulted", help=", ".join(SETUPS), kind="choice", choices=SETUPS),
    ),
    oom_exit_code=3,
)
