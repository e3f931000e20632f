"""What `memsleuth check` costs on real applications, beside each application alone, in one run.

The suite's applications (`compare --suite apps`: redis, sqlite, a Python and a Lua interpreter, gcc,
xz, zstd; measure/apps), each as its shell script runs it there (a process tree: the shell, the
application, its checks), once as the suite gives it (0.4-2.6 s here) and once repeated to about 10 s.
Programs the project's own code was not written for: their shells, pipes, servers, compilers and
interpreters take the paths a built-in workload never does. Each row: the wall time of `memsleuth
check` over the application's own (interleaved rounds, paired ratios) against the budget 2T + 1 s,
and the medians of the phases each check timed itself (its --verbose line; the rest of its wall
time is its start-up and exit). An application whose programs are missing is left out with the
reason (`make setup` installs them).

    python bench/check_cost_apps.py [--quick]

--quick leaves out the 10 s rows. BENCH_APPS=xz,gcc picks some.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from common import check_budget, wall

from memsleuth.measure.apps import APPS

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
LONG_S = 10.0


def repeated(argv: list[str], times: int) -> list[str]:
    """The application's command run `times` times in one shell, stopping at the first failure."""
    return ["sh", "-c", f"for i in $(seq {times}); do {shlex.join(argv)} || exit 1; done"]


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    chosen = os.environ.get("BENCH_APPS")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_CACHE_HOME"] = f"{tmp}/cache"   # the symbols cache starts empty: round 1 fills it
        db = f"{tmp}/c.db"
        for app in APPS:
            if chosen and app.name not in chosen.split(","):
                continue
            if app.missing():
                print(f"{app.name:8} left out: {', '.join(app.missing())} not on PATH (make setup installs them)")
                continue
            folder = Path(tmp) / app.name
            folder.mkdir()
            app.prepare(folder)
            argv = app.command(folder)
            try:
                once = min(wall(argv) for _ in range(2))
            except subprocess.CalledProcessError as e:     # its own check failed here: no time to compare
                print(f"{app.name:8} left out: its script failed (exit {e.returncode}) on this machine")
                continue
            check_budget(f"{app.name:8} as given", argv, db, ROUNDS)
            if not quick:
                times = max(2, round(LONG_S / once))
                check_budget(f"{app.name:8} {times:>2} times", repeated(argv, times), db, ROUNDS)
    print("Target: check within 2T + 1 s on every application (OVER marks a miss).")


if __name__ == "__main__":
    main()
