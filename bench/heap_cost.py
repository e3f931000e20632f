"""The heap accounting's cost and accuracy (issue 21), measured side by side in one run.

Cost: built-in allocator workloads run with and without libmsheap preloaded in front of glibc,
interleaved round by round; the ratio is the paired median of region main's CPU time per op
(with / without). Target: at most 1.3x on an allocation-heavy workload with the default sampling
(one stack per 1 MiB allocated on average).
Accuracy: fx-live counts its own live blocks' usable bytes; the accounting's live bytes at exit
are compared with that, under every installed allocator.
A real program (the apps suite's sqlite3 load, when sqlite3 is installed): its CPU time (the
child's own user + system time) with and without libmsheap, interleaved, and the cost per
malloc-family call (the difference over the calls the accounting counted). Measured here (2 vCPUs,
2026-11-29, sqlite3's 3.0 million calls in 0.39 s, 12 rounds, CPU time from perf stat): +5.4% with
the accounting (~7 ns a call), +1.8% with an interposer that forwards every call and counts nothing
(the floor of interposing; built apart, not here), so the accounting itself ~4.7 ns a call, of which
reading the usable size ~1.7 ns and the size histogram ~0.3 ns. This bench's own line there:
1.059x [1.010, 1.112], about 10 ns a call (the rusage's CPU time, noisier).
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

from common import fixture, interleave, ratio_line
from memsleuth.measure import allocators, native
from memsleuth.measure.apps import APPS
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


def cpu_of(argv: list[str], stdin: str, env: dict) -> float:
    """The child's own CPU time (user + system, from its rusage), in seconds."""
    with open(stdin) as f:
        proc = subprocess.Popen(argv, stdin=f, stdout=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} exited {proc.returncode}")
    return usage.ru_utime + usage.ru_stime


def real_program(lib: str) -> None:
    app = next(a for a in APPS if a.name == "sqlite")
    if app.missing():
        print(f"a real program: left out, {', '.join(app.missing())} not on PATH (make setup installs it)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        app.prepare(folder)
        argv, sql, docs = ["sqlite3", ":memory:"], str(folder / "load.sql"), folder / "heap"
        docs.mkdir()
        plain_env = dict(os.environ)
        heap_env = {**os.environ, "LD_PRELOAD": lib, "MEMSLEUTH_HEAP_OUT": str(docs)}
        got = interleave({"plain": lambda: cpu_of(argv, sql, plain_env), "heap": lambda: cpu_of(argv, sql, heap_env)},
                         ROUNDS)
        calls = heap.read(str(docs))
        if not calls:
            raise SystemExit(f"sqlite3 under {lib} wrote no heap document: the accounting did not load")
        per_run = (calls["allocs"] + calls["frees"]) / ROUNDS
    extra_ns = (statistics.median(got["heap"]) - statistics.median(got["plain"])) * 1e9
    print(f"a real program: sqlite3's load and queries (apps suite), its CPU time, {ROUNDS} interleaved rounds")
    print("  " + ratio_line("with libmsheap / without", got["heap"], got["plain"]))
    print(f"  {per_run / 1e6:.1f} million malloc-family calls a run: about {extra_ns / per_run:.1f} ns a call "
          f"(medians' difference)", flush=True)


def main() -> None:
    lib = str(native.native_path("libmsheap.so"))
    print(f"heap accounting cost: region main's CPU time per op with libmsheap / without, {ROUNDS} interleaved rounds")
    for name, args in WORKLOADS:
        argv = [str(native.native_path(name)), *args]
        got = interleave({"plain": lambda: cpu_per_op(argv, None), "heap": lambda: cpu_per_op(argv, lib)}, ROUNDS)
        print("  " + ratio_line(f"{name} {' '.join(args)}", got["heap"], got["plain"]), flush=True)
    real_program(lib)
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
