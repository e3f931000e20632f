"""What the latency sampling costs: region main's ns/op with the default sampling (1 in 256 calls
timed; BENCH_EVERY changes it) against none (--latency-every=0), interleaved, under glibc and one
other allocator, per allocator workload. Printed as paired ratios (sampled / unsampled time per op)."""
from __future__ import annotations

import json
import os
import subprocess
import tempfile

from common import Holder, interleave, ratio_line
from memsleuth.measure import allocators, native, workloads
from memsleuth.measure.launcher import normalise

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "9"))
EVERY = int(os.environ.get("BENCH_EVERY", "256"))
ARGS = {
    "random-mixed": ["--iterations=2000000", "--ws=400"],
    "server": ["--iterations=300000"],
    "threads-stress": ["--iterations=100000"],
    "realloc-growth": ["--iterations=200"],
}


def ns_per_op(alloc, name: str, every: int) -> float:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        argv = [str(native.ms_run()), "--out", out.name]
        if alloc.preload:
            argv += ["--preload", alloc.preload]
        argv += ["--", str(native.native_path(workloads.get(name).program)), *ARGS[name], f"--latency-every={every}"]
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        doc = normalise(json.load(open(out.name)))
    main = next(p for p in doc["probe"] if isinstance(p, dict) and p.get("name") == "main")
    return main["wall_ns"] / main["ops"]


def main() -> None:
    found = allocators.available()
    chosen = [a for a in found if a.name == "glibc"] + [a for a in found if a.name == "mimalloc"][:1]
    with Holder():
        for name in ARGS:
            for alloc in chosen:
                v = interleave({"sampled": lambda: ns_per_op(alloc, name, EVERY),
                                "none": lambda: ns_per_op(alloc, name, 0)}, ROUNDS)
                label = f"{name:15} {alloc.name:9} sampled (1 in {EVERY}) / none, time per op"
                print(ratio_line(label, v["sampled"], v["none"]),
                      flush=True)


if __name__ == "__main__":
    main()
