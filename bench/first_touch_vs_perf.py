"""The first-touch case's pre-faulted copy bandwidth against `perf bench mem memcpy`, same run.

Both copy 1 GiB with glibc's memcpy between buffers faulted in beforehand: memsleuth's
first-touch workload (setup=prefaulted, regions copy and copy-again, run under ms-run like the
case) and perf's memcpy benchmark (which prefaults with one untimed memcpy, then times one loop).
They run interleaved, rotating the order each round; each round's ratio memsleuth / perf is
paired, and the median ratio with its 95% CI is printed. Target: within 10% of perf.

perf prints "GB/sec" in units of 2^30 bytes; converted here to 10^9 B/s like memsleuth's GB/s.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys

from common import Holder, interleave, ratio_line  # noqa: E402

from memsleuth.measure import allocators, launcher
from memsleuth.measure.plan import Cell
from memsleuth.measure.workloads import first_touch

BYTES = 1 << 30
ROUNDS = 7


def perf_gbs() -> float:
    out = subprocess.run(["perf", "bench", "mem", "memcpy", "-s", "1GB", "-l", "1", "-f", "default"],
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"([\d.]+) GB/sec", out)
    if not m:
        sys.exit(f"cannot read perf bench's output:\n{out}")
    return float(m.group(1)) * (1 << 30) / 1e9


def ours() -> tuple[float, float]:
    """GB/s of regions copy and copy-again of one first-touch run."""
    values = {"bytes": BYTES, "setup": "prefaulted"}
    cell = Cell(allocators.glibc(), values, tuple(first_touch.WORKLOAD.argv(values)))
    s = launcher.run_cell(cell, timeout_s=120, mem_limit_bytes=None)
    if not s.ok:
        sys.exit(f"first-touch failed: {s.status} {s.detail}")
    return BYTES / s.region("copy").wall_ns, BYTES / s.region("copy-again").wall_ns


def main() -> None:
    if shutil.which("perf") is None:
        sys.exit("perf is not installed (Debian: linux-perf)")
    again: list[float] = []

    def copy() -> float:
        first, second = ours()   # one run gives both regions; copy-again is kept for its own ratio
        again.append(second)
        return first

    with Holder():
        res = interleave({"memsleuth copy": copy, "perf bench": perf_gbs}, ROUNDS)
    res["memsleuth copy-again"] = again
    print(f"first-touch (prefaulted, 1 GiB) vs perf bench mem memcpy, {ROUNDS} interleaved rounds")
    for name, vals in res.items():
        print(f"  {name}: median {sorted(vals)[len(vals) // 2]:.2f} GB/s  ({', '.join(f'{v:.2f}' for v in vals)})")
    print("  " + ratio_line("memsleuth copy / perf (bandwidth ratio)", res["memsleuth copy"], res["perf bench"]))
    print("  " + ratio_line("memsleuth copy-again / perf (bandwidth ratio)", again, res["perf bench"]))


if __name__ == "__main__":
    main()
