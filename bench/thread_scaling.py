"""How memsleuth's own runs scale with the program's threads, measured side by side in one run.

For each thread count T (1, 2, 4, ... up to the CPUs here; BENCH_THREADS=1,4,16 chooses), two
built-in workloads whose threads each do a fixed amount of work, so a program that scales takes
the same wall time at every T while T is at most the CPUs:
- threads-stress: each thread mallocs and frees its own blocks;
- server: the threads replace blocks in one shared table, so most frees are of another thread's.
Interleaved in each round: the program alone, its measured run (ms-run: counters on the command's
tasks, syscalls by name, the RSS timeline) and an explaining run as `check` makes one (the heap
accounting in front of glibc, the call-site sampler, the CPU samplers, the memory syscalls'
arguments): the program's wall time, for the two runs as ms-run measured it. Printed for each T:
measured run / program and explaining run / measured run, paired, with 95% CIs. Whatever
memsleuth's preloads share between threads (libmsheap's totals and its table of sampled blocks,
the samplers' buffers) shows as an explaining-run ratio that grows with T.

The 2-core VM can only show T = 1 and 2; a 16-core machine shows the rest. Measured on a lent
16-core VM (Intel Xeon, kernel 6.18, glibc 2.39; 2026-11-27, 4 rounds, BENCH_THREADS=1,4,16), the
explaining run over the measured run: threads-stress 1.21x at 1 thread, 1.24x at 4, 1.18x at 16;
server 1.19x at 1, 1.05x at 4, 1.08x at 16 (3 rounds). It does not grow
with the threads. On this project's 2-vCPU VM (3 rounds): threads-stress 1.32x and 1.25x, server
1.44x and 1.24x at 1 and 2 threads.

    .venv/bin/python bench/thread_scaling.py        (root for the syscall tracepoints)
    BENCH_THREADS=16 BENCH_WORKLOADS=server BENCH_ROUNDS=3 .venv/bin/python bench/thread_scaling.py
"""
from __future__ import annotations

import os
import sys

from common import Holder, interleave, ratio_line, wall

from memsleuth.measure import allocators, launcher, native, runner, where
from memsleuth.measure.plan import Cell

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
# per-thread work of about 0.5-1 s alone on this project's VM
WORKLOADS = {"threads-stress": ["--iterations=12000000"], "server": ["--iterations=6000000"]}


def thread_counts() -> list[int]:
    if os.environ.get("BENCH_THREADS"):
        return [int(t) for t in os.environ["BENCH_THREADS"].split(",")]
    cpus = len(os.sched_getaffinity(0))
    out, t = [], 1
    while t <= cpus:
        out.append(t)
        t *= 2
    return out if out[-1] == cpus else out + [cpus]


def run_wall(cell: Cell, **explaining) -> float:
    """The command's wall time under ms-run, as ms-run measured it (what memsleuth reads after the
    run, symbolization included, is check's cost, not the program's)."""
    s = launcher.run_cell(cell, timeout_s=600, mem_limit_bytes=None, **explaining)
    if not s.ok:
        sys.exit(f"{' '.join(cell.command)}: {s.status}")
    return s.wall_ns / 1e9


def main() -> None:
    print(f"{len(os.sched_getaffinity(0))} CPUs; {ROUNDS} interleaved rounds; wall times, paired ratios", flush=True)
    chosen = os.environ.get("BENCH_WORKLOADS", ",".join(WORKLOADS)).split(",")
    for name, args in ((n, a) for n, a in WORKLOADS.items() if n in chosen):
        for t in thread_counts():
            argv = [str(native.native_path(name)), *args, f"--threads={t}"]
            cell = Cell(allocators.glibc(), {}, tuple(argv))
            first = launcher.run_cell(cell, timeout_s=600, mem_limit_bytes=None)
            counts = runner.site_counts([first])
            # what check's explaining run carries, every part of it switched on
            periods = (where.periods(counts) or {"page-faults": 1000}) if where.sampler_usable() else None
            explaining = dict(syscall_args=True, heap=True, sites=periods, args_every=runner.args_every(counts),
                              cpu_sample_us=runner.cpu_sample_us([first]))
            with Holder(args=True):
                got = interleave({"program": lambda: wall(argv), "measured": lambda: run_wall(cell),
                                  "explaining": lambda: run_wall(cell, **explaining)}, ROUNDS)
            alone = sorted(got["program"])[len(got["program"]) // 2]
            print(f"{name} --threads={t:<3} alone {alone:6.2f} s; "
                  + ratio_line("measured / program", got["measured"], got["program"]) + "; "
                  + ratio_line("explaining / measured", got["explaining"], got["measured"]), flush=True)
    print("A ratio that grows with T is memsleuth's own cost growing with the program's threads.")


if __name__ == "__main__":
    main()
