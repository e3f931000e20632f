"""The heap accounting's cost and accuracy (issue 21), measured side by side in one run.

Cost: built-in allocator workloads run with and without libmsheap preloaded in front of glibc,
interleaved round by round; the ratio is the paired median of region main's CPU time per op
(with / without). Target: at most 1.3x on an allocation-heavy workload with the default sampling
(one stack per 1 MiB allocated on average).
Accuracy: fx-live counts its own live blocks' usable bytes; the accounting's live bytes at exit
are compared with that, under every installed allocator.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile

from common import fixture, interleave, ratio_line
from memsleuth.measure import allocators, native
from memsleuth.records import heap

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "10"))
WORKLOADS = [("random-mixed", ["--iterations=3000000", "--ws=400"]),
             ("threads-stress", ["--iterations=300000", "--threads=2"])]


def cpu_per_op(argv: list[str], preload: str | None) -> float:
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp:
        if preload:
            env.update(LD_PRELOAD=preload, MEMSLEUTH_HEAP_OUT=tmp)
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    for line in proc.stderr.splitlines():
        if 'region "main"' in line:
            user = float(line.split("user ")[1].split(" ms")[0])
            sys_ = float(line.split("sys ")[1].split(" ms")[0])
            ops = float(line.split(" ops")[0].rsplit(", ", 1)[1])
            return (user + sys_) / ops
    raise SystemExit(f"no region main in {argv[0]}'s output")


def main() -> None:
    lib = str(native.native_path("libmsheap.so"))
    print(f"heap accounting cost: region main's CPU time per op with libmsheap / without, {ROUNDS} interleaved rounds")
    for name, args in WORKLOADS:
        argv = [str(native.native_path(name)), *args]
        got = interleave({"plain": lambda: cpu_per_op(argv, None), "heap": lambda: cpu_per_op(argv, lib)}, ROUNDS)
        print("  " + ratio_line(f"{name} {' '.join(args)}", got["heap"], got["plain"]), flush=True)
    print("live-bytes accuracy (fx-live 100000 ops, 2 threads; the program's own count of usable bytes):")
    for a in allocators.available():
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "MEMSLEUTH_HEAP_OUT": tmp, "LD_PRELOAD": lib + (":" + a.preload if a.preload else "")}
            out = subprocess.run([fixture("fx-live"), "100000", "3", "2"], capture_output=True, text=True, env=env,
                                 check=True)
            truth = json.loads(out.stdout)
            h = heap.read(tmp)
        d = h["live_bytes"] - truth["live_usable"]
        print(f"  {a.name:<9} live at exit {h['live_bytes']:>12,} B, the program's own {truth['live_usable']:>12,} B: "
              f"{d:+,} B ({d / truth['live_usable'] * 100:+.4f}%); peak {h['peak_live_bytes']:,} B against the threads' "
              f"summed peaks {truth['peak_usable']:,} B")


if __name__ == "__main__":
    main()
