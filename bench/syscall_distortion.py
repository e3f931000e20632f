"""How much counting syscalls distorts a madvise-heavy program: memsleuth vs `strace -c -f`.

Each is reported as a slowdown against the same program run bare (no ms-run, no counters),
interleaved, as paired ratios of wall time.
"""
from __future__ import annotations

import os
import shutil
import tempfile

from common import Holder, fixture, interleave, ratio_line, wall
from memsleuth.measure import native

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "10"))
CALLS = "200000"


def run() -> None:
    prog = [fixture("fx-madvise_n"), CALLS]
    print(f"bench/syscall_distortion: {CALLS} madvise calls, {ROUNDS} interleaved rounds")
    tmp = tempfile.mkdtemp()
    alts = {
        "bare": lambda: wall(prog, {"MEMSLEUTH_NO_COUNTERS": "1"}),
        "memsleuth": lambda: wall([str(native.ms_run()), "--out", os.path.join(tmp, "o.json"), "--", *prog]),
    }
    if shutil.which("strace"):
        alts["strace"] = lambda: wall(["strace", "-c", "-f", "-o", os.path.join(tmp, "s.txt"), *prog],
                                      {"MEMSLEUTH_NO_COUNTERS": "1"})
    else:
        print("  strace not installed: only memsleuth is measured")
    with Holder():
        res = interleave(alts, ROUNDS)
    print(ratio_line("  memsleuth (ms-run + probe, syscall tracepoints) / bare", res["memsleuth"], res["bare"]))
    if "strace" in res:
        print(ratio_line("  strace -c -f / bare", res["strace"], res["bare"]))
        print(ratio_line("  strace -c -f / memsleuth", res["strace"], res["memsleuth"]))
    shutil.rmtree(tmp)


if __name__ == "__main__":
    run()
