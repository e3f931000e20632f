"""thread-heap (seed 002): a std::vector built in a function every worker calls; threads vs processes."""
from __future__ import annotations

from memsleuth.measure.workloads.base import Param, Workload

FORMS = ("local", "thread_local", "static")
MODES = ("threads", "processes")

WORKLOAD = Workload(
    name="thread-heap",
    program="thread-heap",
    description="T workers each build a std::vector C times (forms local, thread_local, static); glibc arenas per "
                "process (heap accounting)",
    params=(
        Param("threads", 2, 1, 256, "workers (threads or processes)"),
        Param("calls", 20000, 1, 1 << 40, "calls per worker"),
        Param("elems", 4096, 1, 1 << 28, "elements pushed into the vector per call"),
        Param("form", "local", help=", ".join(FORMS), kind="choice", choices=FORMS),
        Param("mode", "threads", help=", ".join(MODES), kind="choice", choices=MODES),
    ),
    heap=True,
)
