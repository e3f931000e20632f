"""What `memsleuth check` costs against the program it explains, measured side by side in one run:
for programs of about 0.1 s and 1 s, fault-heavy, syscall-heavy and clean, the wall time of
`memsleuth check -- PROG` over the program's own wall time (interleaved rounds, paired ratios), and
`check -- true` alone. Targets (issue 24): `check -- true` under 1 s; for T >= 1 s, at most 2T + 1 s.

    MEMSLEUTH_TEST_FIXTURES=build/test python bench/check_cost.py
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
import subprocess

from common import fixture, interleave, ratio_line, wall

ROUNDS = 3


def check_wall(argv: list[str], db: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "memsleuth", "check", "--db", db, "--", *argv],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t0


def main() -> None:
    programs = {
        "fault-heavy ~0.1 s": [fixture("plain-bigtouch"), "96"],
        "fault-heavy ~1 s": [fixture("plain-bigtouch"), "900"],
        "syscall-heavy ~0.1 s": [fixture("plain-madvise_pool"), "40000"],
        "syscall-heavy ~1 s": [fixture("plain-madvise_pool"), "400000"],
        "clean ~0.1 s": [fixture("plain-cpu"), "40000000"],
        "clean ~1 s": [fixture("plain-cpu"), "400000000"],
    }
    with tempfile.TemporaryDirectory() as tmp:
        db = f"{tmp}/c.db"
        t_true = [check_wall(["true"], db) for _ in range(ROUNDS)]
        print(f"check -- true: {statistics.median(t_true):.2f} s (target under 1 s)")
        for name, argv in programs.items():
            got = interleave({"program": lambda a=argv: wall(a), "check": lambda a=argv: check_wall(a, db)}, ROUNDS)
            t, c = statistics.median(got["program"]), statistics.median(got["check"])
            budget = 2 * t + 1
            print(f"{name:22} program {t:6.2f} s, check {c:6.2f} s, budget 2T+1 = {budget:5.2f} s: "
                  f"{'within' if c <= budget else 'OVER'}; " + ratio_line("check / program", got["check"],
                                                                           got["program"]))


if __name__ == "__main__":
    main()
