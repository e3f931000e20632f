"""What `memsleuth check` costs against the program it explains, measured side by side in one run.

1. `check -- true` alone (target: under 1 s).
2. For programs of about 0.1 s, 1 s and 10 s, fault-heavy, syscall-heavy and clean: the wall time
   of `memsleuth check -- PROG` over the program's own wall time (interleaved rounds, paired
   ratios), against the budget 2T + 1 s (target for T >= 1 s).
3. The explaining run alone (syscall arguments with the faults' addresses, heap accounting, call
   sites and the sampled CPU time in one run, as check makes it) over a plain measured run of
   the same program, both through ms-run, interleaved (target: at most 1.10x); and the measured
   run over the program itself, which shows the floor under check's cost: the measured run counts
   every syscall by name (a tracepoint), and the explaining run runs the whole program again.

check is timed with nothing held: it starts and lets go of its own tracepoint holder. The
measured and explaining runs alone are timed under a holder, as the runner runs them.

    MEMSLEUTH_TEST_FIXTURES=build/test python bench/check_cost.py [--quick]

--quick leaves out the 10 s programs.
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time

from common import Holder, fixture, interleave, ratio_line, wall

from memsleuth.measure import allocators, launcher, runner, where
from memsleuth.measure.plan import Cell

ROUNDS = 3


def check_wall(argv: list[str], db: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "memsleuth", "check", "--db", db, "--", *argv],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t0


def programs(quick: bool) -> dict[str, list[str]]:
    out = {
        "fault-heavy ~0.1 s": [fixture("plain-bigtouch"), "96"],
        "fault-heavy ~1 s": [fixture("plain-steps"), "20"],
        "fault-heavy ~10 s": [fixture("plain-steps"), "200"],
        "syscall-heavy ~0.1 s": [fixture("plain-madvise_pool"), "40000"],
        "syscall-heavy ~1 s": [fixture("plain-madvise_pool"), "350000"],
        "syscall-heavy ~10 s": [fixture("plain-madvise_pool"), "3500000"],
        "clean ~0.1 s": [fixture("plain-cpu"), "40000000"],
        "clean ~1 s": [fixture("plain-cpu"), "400000000"],
        "clean ~10 s": [fixture("plain-cpu"), "4000000000"],
    }
    return {k: v for k, v in out.items() if not (quick and "~10 s" in k)}


def explaining_ratio(argv: list[str]) -> list[str]:
    """The explaining run check would make, over a plain measured run, and the measured run over
    the program alone, interleaved."""
    cell = Cell(allocators.glibc(), {}, tuple(argv))
    first = launcher.run_cell(cell, timeout_s=600, mem_limit_bytes=None)
    counts = runner.site_counts([first])
    periods, every = where.periods(counts), runner.args_every(counts)

    def plain() -> float:
        return launcher.run_cell(cell, timeout_s=600, mem_limit_bytes=None).wall_ns / 1e9

    def explaining() -> float:
        s = launcher.run_cell(cell, timeout_s=600, mem_limit_bytes=None, syscall_args=True, heap=True,
                              sites=periods, args_every=every, cpu_sample_us=runner.cpu_sample_us([first]))
        return s.wall_ns / 1e9

    with Holder():
        got = interleave({"program": lambda: wall(argv), "plain": plain, "explaining": explaining}, ROUNDS)
    return [ratio_line("measured run / program", got["plain"], got["program"]),
            ratio_line("explaining run / plain run", got["explaining"], got["plain"])]


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    with tempfile.TemporaryDirectory() as tmp:
        db = f"{tmp}/c.db"
        t_true = [check_wall(["true"], db) for _ in range(ROUNDS)]
        print(f"check -- true: {statistics.median(t_true):.2f} s (target under 1 s)", flush=True)
        for name, argv in programs(quick).items():
            got = interleave({"program": lambda a=argv: wall(a), "check": lambda a=argv: check_wall(a, db)}, ROUNDS)
            t, c = statistics.median(got["program"]), statistics.median(got["check"])
            budget = 2 * t + 1
            verdict = ("within" if c <= budget else "OVER") if t >= 1 else ("within" if c <= budget else "over")
            print(f"{name:22} program {t:6.2f} s, check {c:6.2f} s, budget 2T+1 = {budget:5.2f} s: {verdict}; "
                  + ratio_line("check / program", got["check"], got["program"]), flush=True)
            if "~0.1 s" not in name:
                for line in explaining_ratio(argv):
                    print(f"{'':22} " + line, flush=True)
    print("Targets: check -- true under 1 s; for T >= 1 s check within 2T + 1 s (OVER marks a miss; below 1 s the "
          "budget is only shown); the explaining run at most 1.10x.")


if __name__ == "__main__":
    main()
