"""How long the CLI takes to answer `--help`: `memsleuth --help` and every subcommand's, against
`python -c pass` measured in the same interleaved rounds (the interpreter's own start-up).
Target: under 0.2 s each (issue: a CLI that starts at once). Prints medians and ratios."""
from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROUNDS = 7
EXE = [sys.executable, "-m", "memsleuth"]
SUBS = ["compare", "case", "check", "show", "diff", "history", "export", "merge", "fleet", "doctor"]


def wall(argv: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t0


def main() -> None:
    variants = {"python -c pass": [sys.executable, "-c", "pass"], "memsleuth --help": [*EXE, "--help"]}
    variants.update({f"memsleuth {s} --help": [*EXE, s, "--help"] for s in SUBS})
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(ROUNDS):
        for name, argv in variants.items():  # interleaved: drift hits every variant alike
            times[name].append(wall(argv))
    base = statistics.median(times["python -c pass"])
    print(f"{'command':<28} {'median s':>9} {'max s':>7} {'minus python':>13}")
    worst = 0.0
    for name, t in times.items():
        med = statistics.median(t)
        if name != "python -c pass":
            worst = max(worst, med)
        print(f"{name:<28} {med:9.3f} {max(t):7.3f} {med - base:13.3f}")
    print(f"slowest --help: {worst:.3f} s (target 0.200 s): {'ok' if worst < 0.2 else 'OVER'}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    main()
