"""What a measured run costs beside the program alone: the same program run plain and under ms-run,
interleaved, on three shapes of program: a CPU loop (no system calls), a fault-heavy one (maps 64
MiB, writes every page, unmaps it, again and again) and a syscall-heavy one (small madvise calls in
a loop), and two that create tasks (a thread per task, a process per task: fork, exit, wait). Each
line is the paired ratio of wall times, ms-run over alone, with its 95% CI; the target is <= 1.02
(issue 44).

Two ways of running, each against the program alone under the same conditions:
- timed: as compare's, the cases' and the suites' timed rounds run it (`ms-run --no-syscalls`, no
  tracepoint holder: the counters, the 10 ms RSS timeline, the cgroup; the syscalls by name are
  counted in the warm-up, docs/architecture.md);
- counting: as check's measured run and gate's rounds (every memory syscall counted on its
  tracepoint, the holder alive, which also slows the program alone: every syscall of every task
  then takes the kernel's slow path).

Measured here (2 vCPUs, 2026-11-26, 8 rounds, counting): cpu loop 0.977x [0.931, 1.095]; fault-heavy
1.026x [1.019, 1.111]; syscall-heavy 1.298x [1.250, 1.360]. The syscall-heavy line is the syscall
tracepoints: counting a call by name runs the kernel's tracepoint path on every system call (about
100 ns each here, 30% of a 300 ns madvise; bench/syscall_distortion.py sets it beside strace).

Measured here 2026-11-28, 10 rounds, timed, after ms-run stopped counting the faults with perf
events (rusage and /proc instead: an event on a fault type costs every fault ~45 ns) and started
creating the command in its cgroup (clone3; moving it there waited out an RCU grace period): cpu
loop 1.011x [0.986, 1.024]; fault-heavy 1.002x [0.984, 1.042] (1.060x before); syscall-heavy 1.015x
[1.004, 1.021]; thread per task 0.988x, process per task 0.977x (their CIs 0.92-1.17).

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
            variants = {"alone": lambda: wall([exe]),
                        "timed": lambda: wall([ms_run, "--no-syscalls", "--out", out, "--", exe])}
            if name in CREATE_TASKS:
                variants["inherited"] = lambda: wall([ms_run, "--no-syscalls", "--inherited-events", "--out", out,
                                                      "--", exe])
            res = interleave(variants, ROUNDS)
            print(ratio_line(f"  {name:16s} timed (ms-run --no-syscalls) / alone", res["timed"], res["alone"]))
            if "inherited" in res:
                print(ratio_line(f"  {name:16s} timed --inherited-events / alone", res["inherited"], res["alone"]))
        for name in ("cpu loop", "fault-heavy", "syscall-heavy"):
            exe = progs[name]
            with Holder():
                res = interleave({"alone": lambda: wall([exe]),
                                  "counting": lambda: wall([ms_run, "--out", out, "--", exe])}, max(3, ROUNDS // 2))
            print(ratio_line(f"  {name:16s} counting (syscalls by name, holder alive) / alone, holder alive",
                             res["counting"], res["alone"]))


if __name__ == "__main__":
    run()
