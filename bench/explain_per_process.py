"""What the explaining run's in-program libraries cost each process a tree starts, in one run.

A shell starts /bin/true N times (a process tree such as a build, a test script or an interpreter's
launcher makes), alone and with each library preloaded as an explaining run preloads it: libmssites
(the call-site sampler, with page faults and five syscall tracepoints, as `check` asks for them on
a small program), libmsheap (the heap accounting) and both. The tracepoint holder is alive, as in
`check`. Each row: the median wall time over interleaved rounds and the cost per process over the
tree alone, which is the libraries' loading, their start and their document at exit.

    python bench/explain_per_process.py        BENCH_ROUNDS=9 BENCH_PROCESSES=500

BENCH_COMPARE=DIR adds the same rows with the libraries built in DIR (another checkout's build),
interleaved with these: a change to either library measured side by side.

Seen here (2 vCPU VM, ext4 /tmp, 300 processes, 7 rounds, BENCH_COMPARE with the build before):
a document file per process: sampler 1.01, heap accounting 1.12, both 1.88 ms a process; one file
per kind (sites.jsonl, heap.jsonl): 0.57, 0.57, 1.10 ms. Then without libm (ms_math.h), beside
that build: heap accounting 0.54 -> 0.49 ms, both 1.20 -> 0.94 ms (the sampler's rows, the same
library twice, read 0.61 and 0.69 ms: the spread between rounds). Then /proc/self/maps read only
where a document names addresses: no change resolved here (both 0.89 -> 0.87 ms, /bin/true takes a
fault sample at page-faults=103); with periods no process reaches, the sampler 0.51 -> 0.43 ms.
"""
from __future__ import annotations

import os
import statistics
import tempfile

from common import Holder, interleave, wall

from memsleuth.measure import native, where

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "7"))
PROCESSES = int(os.environ.get("BENCH_PROCESSES", "300"))
SPEC = where.sites_spec({"page-faults": 103, "mmap": 2, "munmap": 1, "brk": 1, "mprotect": 6, "futex": 1})


def main() -> None:
    tree = ["sh", "-c", f"for i in $(seq {PROCESSES}); do /bin/true; done"]
    sites, heap = str(native.native_path("libmssites.so")), str(native.native_path("libmsheap.so"))

    def run(preload: list[str]):
        def once() -> float:
            with tempfile.TemporaryDirectory() as out:
                env = {"MEMSLEUTH_SITES": SPEC, "MEMSLEUTH_SITES_OUT": out, "MEMSLEUTH_HEAP_OUT": out,
                       "LD_PRELOAD": ":".join(preload)} if preload else {}
                return wall(tree, env)
        return once

    variants = {"alone": run([]), "sampler": run([sites]), "heap accounting": run([heap]),
                "both": run([heap, sites])}
    other = os.environ.get("BENCH_COMPARE")
    if other:
        o_sites, o_heap = os.path.join(other, "libmssites.so"), os.path.join(other, "libmsheap.so")
        for lib in (o_sites, o_heap):
            if not os.path.exists(lib):
                raise SystemExit(f"BENCH_COMPARE: {lib} missing")
        variants.update({"sampler, DIR": run([o_sites]), "heap accounting, DIR": run([o_heap]),
                         "both, DIR": run([o_heap, o_sites])})
    with Holder(args=True):
        got = interleave(variants, ROUNDS)
    alone = statistics.median(got["alone"])
    print(f"{PROCESSES} processes of /bin/true from one shell, {ROUNDS} interleaved rounds (median wall):")
    for name, times in got.items():
        t = statistics.median(times)
        extra = "" if name == "alone" else f"   {(t - alone) / PROCESSES * 1e3:+.3f} ms a process"
        print(f"  {name:21} {t:7.3f} s{extra}")
    if other:
        print(f"  DIR: {other}")


if __name__ == "__main__":
    main()
