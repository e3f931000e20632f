"""What explaining costs, as ratios measured side by side in one run (interleaved rounds).

- timelines: ms-run sampling the process tree every 10 ms (RSS, heap, running fault and syscall
  totals) against one sample per minute (no timeline): target 1.02 or less;
- --syscall-args: the munmap/madvise/mmap/mremap/brk arguments from tracepoint samples, in every
  measured run of `check` and `compare --where`;
- --where's perf run: one extra run under `perf record` with DWARF stacks at memsleuth's default
  rates. It is a separate run, so it never distorts a measured figure; its ratio is the extra
  wall time it costs (target 1.10 or less for the sampling itself).

On a fault-heavy program (seed 000's loop) and a syscall-heavy one (a pool that madvises every
block). Page-fault cost varies a lot on this VM: read the CIs.
"""
from __future__ import annotations

import shutil
import sys

from common import Holder, fixture, interleave, ratio_line, wall

from memsleuth.measure import native, where

ROUNDS = 9


def wall_any(argv: list[str]) -> float:
    """Wall time of a command whatever its exit status."""
    import subprocess
    import time
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ms_run = str(native.ms_run())
    perf = shutil.which("perf")
    # About 2 s each: perf's fixed start-up (measured on `true` below) is a small part of them.
    programs = {"fault-heavy (plain-steps 60)": [fixture("plain-steps"), "60"],
                "syscall-heavy (plain-madvise_pool 800000)": [fixture("plain-madvise_pool"), "800000"]}
    with Holder():
        for label, cmd in programs.items():
            alts = {
                "no timeline": lambda cmd=cmd: wall([ms_run, "--sample-ms", "60000", "--out", "/dev/null", "--", *cmd]),
                "timeline": lambda cmd=cmd: wall([ms_run, "--out", "/dev/null", "--", *cmd]),
                "timeline + args": lambda cmd=cmd: wall([ms_run, "--syscall-args", "--out", "/dev/null", "--", *cmd]),
            }
            if perf:
                counts = {"page-faults": 1_800_000 if "steps" in label else 800_000,
                          "brk": 1200 if "steps" in label else 0, "madvise": 0 if "steps" in label else 800_000}
                runs = where.plan_events(counts)
                syscalls, period, fault_period = runs[-1]
                events = [where.EVENTS[s] for s in syscalls] + (
                    [f"page-faults/period={fault_period}/"] if fault_period else [])
                argv = [perf, "record", "-q", "--no-buildid-cache", "-o", "/tmp/memsleuth-bench-perf.data",
                        f"--max-size={where.MAX_DATA}",
                        "--call-graph", f"dwarf,{where.STACK_BYTES}", "-c", str(period)]
                for e in events:
                    argv += ["-e", e]
                alts["plain"] = lambda cmd=cmd: wall(cmd)
                # perf ends the command when --max-size is reached (exit 143): the run is what --where costs.
                alts["under perf record"] = lambda argv=argv, cmd=cmd: wall_any([*argv, "--", *cmd])
            got = interleave(alts, ROUNDS)
            print(f"{label}, {ROUNDS} interleaved rounds:")
            print("  " + ratio_line("timelines (10 ms) vs none", got["timeline"], got["no timeline"]))
            print("  " + ratio_line("+ --syscall-args vs timelines", got["timeline + args"], got["timeline"]))
            if perf:
                print("  " + ratio_line("--where perf run vs a plain run", got["under perf record"], got["plain"]))
            else:
                print("  perf not installed: --where not measured")
        if perf:
            fixed = interleave({"plain": lambda: wall(["true"]),
                                "perf": lambda: wall([perf, "record", "-q", "--no-buildid-cache",
                                                      "-o", "/tmp/memsleuth-bench-perf.data",
                                                      "--call-graph", f"dwarf,{where.STACK_BYTES}", "-e",
                                                      "page-faults", "--", "true"])}, ROUNDS)
            from statistics import median
            print(f"perf record's fixed start-up and tear-down: {median(fixed['perf']) - median(fixed['plain']):.3f} s "
                  "per run (perf on `true`)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
