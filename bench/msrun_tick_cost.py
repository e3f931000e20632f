"""What ms-run's ticks cost: on a machine running many processes besides the command (a shared
login node, a desktop), and on a command that is a large tree of processes (a parallel build, MPI
ranks). A CPU loop alone and under ms-run, with no other process started and with BENCH_OTHERS
(2,000) sleeping ones, interleaved, both ways ms-run finds the command's tree: on its own cgroup
(as root) and from /proc (--inherited-events: a user who may not make a cgroup, and attach). Each
line: the paired ratio of wall times against the loop alone, and ms-run's own CPU time per second
of the run (`perf stat --no-inherit`, where perf is installed). Then a tree of BENCH_TREE (150)
processes, each sleeping, for which only ms-run's own CPU time and its timeline's interval count:
run by ms-run, and attached to for a 2 s window (`check --pid`).

A tick reads the tree's processes only, and lists /proc again only when a task was created since
the last listing (msr_tree.c). Reading every process's stat at every tick, as ms-run did before,
took 2.1 s of CPU in a 2.1 s run with 3,000 other processes here (its 10 ms ticks could not keep
up: 90 of ~210 taken); now 65 ms. A process's maps are read only when its data size moved, its stat
and statm files are kept open between ticks, and ticks that cost more than 1/20 of their interval
are spaced out (ms_run.c keep_ticks_cheap): a tree of 60 sleeping processes took 674 ms of ms-run's
CPU in 2 s, now 90 ms (a point every 20 ms); one of 25 keeps its 10 ms ticks (0.5 ms each, 0.8
without the kept files).

BENCH_COMPARE=PATH runs another ms-run binary (an earlier build's) beside this one, in the same
rounds. Run it with `.venv/bin/python bench/msrun_tick_cost.py`.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from common import interleave, ratio_line, wall
from memsleuth.measure import native

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
OTHERS = int(os.environ.get("BENCH_OTHERS", "2000"))
TREE = int(os.environ.get("BENCH_TREE", "150"))
LOOP = r"""
int main(void) { volatile unsigned long s = 0; for (unsigned long i = 0; i < 1500000000UL; i++) s += i * i;
                 return (int)(s & 1); }
"""


def own_cpu_ms(argv: list[str], out: str) -> float | None:
    """ms-run's own CPU time (not its command's) in ms per second of the run, or None without perf."""
    if shutil.which("perf") is None:
        return None
    r = subprocess.run(["perf", "stat", "--no-inherit", "-x,", "-e", "task-clock", "--", *argv],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        cpu_ms = float(next(x for x in r.stderr.splitlines() if "task-clock" in x).split(",")[0])
        return cpu_ms / (json.loads(Path(out).read_text())["wall_ns"] / 1e9)
    except (StopIteration, ValueError, OSError, KeyError):
        return None


def measure(loop: str, binaries: dict[str, str], out: str, label: str) -> None:
    variants = {"alone": lambda: wall([loop])}
    for name, binary in binaries.items():
        for how, extra in (("cgroup", []), ("/proc", ["--inherited-events"])):
            variants[f"{name} {how}"] = (lambda b=binary, e=extra: wall([b, "--no-syscalls", *e, "--out", out,
                                                                         "--", loop]))
    res = interleave(variants, ROUNDS)
    for key in variants:
        if key == "alone":
            continue
        name, how = key.rsplit(" ", 1)
        cpu = own_cpu_ms([binaries[name], "--no-syscalls", *(["--inherited-events"] if how == "/proc" else []),
                          "--out", out, "--", loop], out)
        own = f"; ms-run's own CPU {cpu:6.1f} ms/s" if cpu is not None else ""
        print(ratio_line(f"  {label:22s} {key:18s} / alone", res[key], res["alone"]) + own)


def tree_line(argv: list[str], out: str, what: str) -> None:
    """ms-run's own CPU per second for one run of `argv` (writing `out`) and its timeline's interval."""
    cpu = own_cpu_ms(argv, out)
    interval = json.loads(Path(out).read_text())["timeline"]["interval_ms"]
    own = f"ms-run's own CPU {cpu:6.1f} ms/s" if cpu is not None else "(no perf: ms-run's CPU unmeasured)"
    print(f"  a tree of {TREE} processes  {what} {own}, a point every {interval} ms")


def large_tree(binaries: dict[str, str], out: str) -> None:
    tree = ["sh", "-c", f"for i in $(seq {TREE}); do sleep 2 & done; wait"]
    for name, binary in binaries.items():
        for how, extra in (("cgroup", []), ("/proc", ["--inherited-events"])):
            tree_line([binary, *extra, "--out", out, "--", *tree], out, f"{name} {how:7s}")
    # attached for a 2 s window to such a tree, already running (check --pid)
    running = subprocess.Popen(["sh", "-c", f"for i in $(seq {TREE}); do sleep 60 & done; wait"])
    try:
        time.sleep(1)
        for name, binary in binaries.items():
            tree_line([binary, "--attach", str(running.pid), "--duration", "2", "--out", out], out, f"{name} attached")
    finally:
        subprocess.run(["pkill", "-P", str(running.pid)], check=False)
        running.kill()
        running.wait()


def main() -> None:
    binaries = {"ms-run": str(native.ms_run())}
    if os.environ.get("BENCH_COMPARE"):
        binaries["compared"] = os.environ["BENCH_COMPARE"]
    print(f"bench/msrun_tick_cost: a CPU loop alone and under ms-run --no-syscalls, {ROUNDS} interleaved "
          f"rounds, with no other process started and with {OTHERS} sleeping")
    with tempfile.TemporaryDirectory() as tmp:
        src, loop = Path(tmp) / "loop.c", str(Path(tmp) / "loop")
        src.write_text(LOOP)
        subprocess.run(["cc", "-O1", "-o", loop, str(src)], check=True)
        out = os.path.join(tmp, "run.json")
        measure(loop, binaries, out, "no other process")
        others = []
        try:
            for _ in range(OTHERS):
                others.append(subprocess.Popen(["sleep", "3600"]))
            measure(loop, binaries, out, f"{OTHERS} other processes")
        finally:
            for p in others:
                p.kill()
            for p in others:
                p.wait()
        large_tree(binaries, out)


if __name__ == "__main__":
    main()
