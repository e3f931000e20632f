"""What a measured run costs beside the program alone: the same program run plain and under ms-run
as `check` and `compare` run it (counters on, the RSS timeline every 10 ms, the tracepoint holder
alive), interleaved, on three shapes of program: a CPU loop (no system calls), a fault-heavy one
(maps 64 MiB, writes every page, unmaps it, again and again) and a syscall-heavy one (small
madvise calls in a loop), and two that create tasks (a thread per task, a process per task: fork,
exit, wait). Each line is the paired ratio of wall times, ms-run over alone, with its
95% CI; the target is <= 1.02 (issue 44). Also shown: the same without the holder, where every
process pays the tracepoints' unregistration at exit.

Measured here (2 vCPUs, 2026-11-26, 8 rounds): cpu loop 0.977x [0.931, 1.095]; fault-heavy 1.026x
[1.019, 1.111]; syscall-heavy 1.298x [1.250, 1.360]; cpu loop without the holder 1.306x. The last two
are the syscall tracepoints: counting a call by name runs the kernel's tracepoint path on every
system call (about 100 ns each here, 30% of a 300 ns madvise; bench/syscall_distortion.py sets it
beside strace), and closing the last event on a tracepoint waits out an RCU grace period, which the
holder memsleuth keeps open during its runs avoids.

Measured here (2 vCPUs, 2026-11-27, 5 rounds, on the command's cgroup): cpu loop 1.016x, fault-heavy
1.042x, syscall-heavy 1.319x, thread per task 1.031x (inherited: 2.705x), process per task 1.123x
(inherited: 1.384x).

The task-creating programs are also run with `--inherited-events`: an event inherited by each new
thread or process is copied into it and summed back at its end, which a cgroup of the command's own
(msr_cgroup.c, the default where root may make one) avoids.

Run it with `make bench` (it builds ms-run) or `.venv/bin/python bench/msrun_overhead.py`.
"""
from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from common import Holder, interleave, ratio_line, wall
from memsleuth.measure import native

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "8"))

PROGRAMS = {
    "cpu loop": r"""
#include <stdio.h>
int main(void) { volatile unsigned long s = 0; for (unsigned long i = 0; i < 2000000000UL; i++) s += i * i;
                 printf("%lu\n", s); return 0; }
""",
    "fault-heavy": r"""
#include <string.h>
#include <sys/mman.h>
int main(void) {
  for (int r = 0; r < 60; r++) {
    char *p = mmap(0, 64 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (long i = 0; i < (64L << 20); i += 4096) p[i] = 1;
    munmap(p, 64 << 20);
  }
  return 0;
}
""",
    "syscall-heavy": r"""
#include <stdlib.h>
#include <sys/mman.h>
int main(void) {
  char *p = aligned_alloc(4096, 1 << 16);
  for (int i = 0; i < 3000000; i++) madvise(p, 4096, MADV_NORMAL);
  return 0;
}
""",
    "thread per task": r"""
#include <pthread.h>
static void *task(void *arg) { return arg; }
int main(void) {
  for (int i = 0; i < 20000; i++) { pthread_t t; pthread_create(&t, 0, task, 0); pthread_join(t, 0); }
  return 0;
}
""",
    "process per task": r"""
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
  for (int i = 0; i < 5000; i++) { pid_t p = fork(); if (!p) _exit(0); waitpid(p, 0, 0); }
  return 0;
}
""",
}
CREATE_TASKS = ("thread per task", "process per task")


def build(folder: Path) -> dict[str, str]:
    out = {}
    for name, source in PROGRAMS.items():
        src, exe = folder / f"{name.replace(' ', '_')}.c", folder / name.replace(" ", "_")
        src.write_text(source)
        subprocess.run(["cc", "-O1", "-pthread", "-o", str(exe), str(src)], check=True)
        out[name] = str(exe)
    return out


def run() -> None:
    ms_run = str(native.ms_run())
    print(f"bench/msrun_overhead: each program alone and under ms-run (counters, 10 ms RSS timeline), "
          f"{ROUNDS} interleaved rounds; target <= 1.02")
    with tempfile.TemporaryDirectory() as tmp:
        progs = build(Path(tmp))
        out = os.path.join(tmp, "run.json")
        for name, exe in progs.items():
            def under() -> float:
                return wall([ms_run, "--out", out, "--", exe])
            variants = {"alone": lambda: wall([exe]), "ms-run": under}
            if name in CREATE_TASKS:
                variants["inherited"] = lambda: wall([ms_run, "--inherited-events", "--out", out, "--", exe])
            with Holder():
                res = interleave(variants, ROUNDS)
            print(ratio_line(f"  {name:16s} ms-run / alone, holder alive", res["ms-run"], res["alone"]))
            if "inherited" in res:
                print(ratio_line(f"  {name:16s} ms-run --inherited-events / alone", res["inherited"], res["alone"]))
        exe = progs["cpu loop"]
        res = interleave({"alone": lambda: wall([exe]),
                          "ms-run": lambda: wall([ms_run, "--out", out, "--", exe])}, max(3, ROUNDS // 2))
        print(ratio_line("  cpu loop       ms-run / alone, no holder (each process unregisters the "
                         "tracepoints)", res["ms-run"], res["alone"]))


if __name__ == "__main__":
    run()
