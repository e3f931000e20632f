"""random-mixed's own cost per operation (RNG, slot choice, bookkeeping) against malloc/free.

Runs the workload with --harness-only=1 (same random numbers, same slot choices and branches, no
malloc or free) and normally, interleaved, under each installed allocator; prints region
`main` ns/op of both and the harness's share of the full loop.
"""
from __future__ import annotations

import json
import os
import tempfile

from common import Holder, interleave
from memsleuth.measure import allocators, native
from memsleuth import stats
from memsleuth.measure.launcher import normalise

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "7"))


def ns_per_op(alloc, ws: int, harness_only: bool) -> float:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        argv = [str(native.ms_run()), "--out", out.name, "--expect-malloc", alloc.malloc_object]
        if alloc.preload:
            argv += ["--preload", alloc.preload]
        argv += ["--", str(native.native_path("random-mixed")), "--iterations=4000000", f"--ws={ws}",
                 f"--harness-only={int(harness_only)}"]
        import subprocess
        subprocess.run(argv, check=True)
        doc = normalise(json.load(open(out.name)))
    main = next(p for p in doc["probe"] if isinstance(p, dict) and p.get("name") == "main")
    return main["wall_ns"] / main["ops"]


def run() -> None:
    print(f"bench/harness_cost: random-mixed --iterations=4000000, {ROUNDS} interleaved rounds, region main ns/op")
    with Holder():
        for ws in (400, 40000):
            for a in allocators.available():
                res = interleave({"harness": lambda: ns_per_op(a, ws, True), "full": lambda: ns_per_op(a, ws, False)},
                                 ROUNDS)
                h, f = stats.median_ci(res["harness"]).median, stats.median_ci(res["full"]).median
                share = stats.paired_ratio(res["harness"], res["full"])
                print(f"  ws={ws:<6} {a.name:<10} harness {h:5.1f} ns/op   full {f:5.1f} ns/op   "
                      f"harness share {share.median:.2f} [{share.low:.2f}, {share.high:.2f}]")


if __name__ == "__main__":
    run()
