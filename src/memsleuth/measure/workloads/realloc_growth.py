"""realloc-growth: buffers grown step by step (vector doubling, string append)."""
from __future__ import annotations

from memsleuth.errors import UsageError
from memsleuth.measure.workloads.base import SEED, Param, Workload, sampling_params

GROWTH = ("add", "double")


def _validate(values: dict) -> None:
    if values["start-size"] > values["final-size"]:
        raise UsageError(f"realloc-growth: start-size ({values['start-size']}) must not exceed final-size "
                         f"({values['final-size']})")


WORKLOAD = Workload(
    name="realloc-growth",
    program="realloc-growth",
    description="buffers grown by realloc from start-size to final-size (+step or doubling), several at once",
    params=(
        Param("growth", "add", help="add (+step per realloc, a string) or double (a vector)", kind="choice",
              choices=GROWTH),
        Param("step", 64, 1, 1 << 30, "bytes added per realloc (growth=add)", kind="size"),
        Param("start-size", 16, 1, 1 << 30, "first size of a buffer", kind="size"),
        Param("final-size", 256 << 10, 1, 1 << 34, "size a buffer is grown to", kind="size"),
        Param("live", 4, 1, 1 << 20, "buffers grown at the same time, in turn"),
        Param("iterations", 200, 1, 1 << 40, "buffers grown per thread"),
        Param("threads", 1, 1, 1024, "threads"),
        SEED,
        *sampling_params(),
    ),
    oom_exit_code=3,
    validate=_validate,
    suite={"iterations": 150},
)
