"""Instrumentation overhead: the same random-mixed run with counters on and off.

Target: <= 2% on the region-of-interest time (region `main`, ns/op). Counters "on" is what
`memsleuth compare` does: ms-run with its counters, the probe with its counters, the tracepoint
holder alive. "Off" is ms-run --no-counters and MEMSLEUTH_NO_COUNTERS=1 (regions keep their clock).
Also shown: the whole-process wall time, and what the holder saves per process.
"""
from __future__ import annotations

import json
import os
import tempfile

from common import Holder, interleave, ratio_line, wall
from memsleuth.measure import native

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "20"))
WORKLOAD = [str(native.native_path("random-mixed")), "--iterations=2000000", "--ws=4000"]


def main_ns_per_op(counters: bool) -> tuple[float, float]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        argv = [str(native.ms_run()), "--out", out.name]
        if not counters:
            argv += ["--no-counters", "--env", "MEMSLEUTH_NO_COUNTERS=1"]
        w = wall(argv + ["--", *WORKLOAD])
        doc = json.load(open(out.name))
    main = next(p for p in doc["probe"] if isinstance(p, dict) and p.get("name") == "main")
    return main["wall_ns"] / main["ops"], w


def run() -> None:
    print(f"bench/overhead: random-mixed {' '.join(WORKLOAD[1:])}, {ROUNDS} interleaved rounds")
    with Holder():
        res = interleave({"on": lambda: main_ns_per_op(True), "off": lambda: main_ns_per_op(False)}, ROUNDS)
    on_ns, on_wall = zip(*res["on"])
    off_ns, off_wall = zip(*res["off"])
    print(ratio_line("  region main ns/op, counters on / off (target <= 1.02)", on_ns, off_ns))
    print(ratio_line("  whole-process wall, counters on / off", on_wall, off_wall))
    # Without the holder every process pays the tracepoint unregistration at exit. Interleaved:
    # one run without a holder, then one with a fresh holder, and so on.
    unheld, held = [], []
    for _ in range(6):
        unheld.append(main_ns_per_op(True)[1])
        with Holder():
            held.append(main_ns_per_op(True)[1])
    print(ratio_line("  whole-process wall, no tracepoint holder / holder", unheld, held))

if __name__ == "__main__":
    run()
