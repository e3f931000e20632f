"""compare on a busy machine: the same comparison of a CPU-bound command (bench/langs/alloc_loop.c,
random mallocs and frees with no probe, so only its whole process is seen: glibc about 1.5x
mimalloc's time here) quiet and beside two busy loops, TRIES times each; printed: how often each
way of judging (the verdict memsleuth gives, which uses paired CPU time where the command is
CPU-bound and the wall time noisy; and wall time alone) resolved the winner the quiet runs resolved.

    python bench/compare_under_load.py [TRIES]      (default 3; the issue's target is 9 of 10)

Measured here (2 vCPUs, 2026-11-26, 10 tries, 2 min 26 s): quiet, mimalloc resolved 10 of 10 (by
wall time); beside two busy loops the verdict resolved mimalloc 10 of 10 (9 judged by paired CPU
time, 1 by wall), wall time alone 7 of 10.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from memsleuth.analysis.summary import analyse
from memsleuth.records.store import Store

HERE = Path(__file__).resolve().parent

ALLOCATORS = "glibc,mimalloc"
REPS = "8"


def busy_loops(n: int = 2) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def build(tmp: Path) -> str:
    exe = tmp / "alloc_loop"
    subprocess.run(["gcc", "-O2", "-o", str(exe), str(HERE / "langs" / "alloc_loop.c")], check=True)
    return str(exe)


def one(tmp: Path, k: int, exe: str) -> tuple[str | None, str | None, str]:
    """(the verdict's resolved winner, wall time's resolved winner, which time the verdict used)."""
    db, js = tmp / f"c{k}.db", tmp / f"c{k}.json"
    cmd = [exe, "20000000"]
    subprocess.run([sys.executable, "-m", "memsleuth", "compare", "--db", str(db), "--alloc", ALLOCATORS,
                    "--reps", REPS, "--no-reference", "--json", str(js), "--", *cmd],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)   # the installed memsleuth
    store = Store(str(db), readonly=True)
    run = store.load_run(store.list_runs()[-1].id)

    def winner(groups) -> str | None:
        best = next((c for g in groups for c in g.cells if c.is_best and c.best_resolved), None)
        return best.cell.allocator.name if best else None
    groups = analyse(run)
    basis = groups[0].time_basis.metric if groups[0].time_basis else "?"
    got = (winner(groups), winner(analyse(run, cpu_time=False)), basis)
    store.close()
    json.loads(js.read_text())      # the export is whole
    return got


def main() -> None:
    tries = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    with tempfile.TemporaryDirectory(prefix="memsleuth-bench-") as d:
        tmp = Path(d)
        exe = build(tmp)
        quiet = [one(tmp, k, exe) for k in range(tries)]
        loops = busy_loops()
        try:
            busy = [one(tmp, 100 + k, exe) for k in range(tries)]
        finally:
            for p in loops:
                p.kill()
    reference = Counter(w for w, _, _ in quiet if w).most_common(1)
    ref = reference[0][0] if reference else None
    print(f"compare --alloc {ALLOCATORS} --reps {REPS} of alloc_loop (a command), {tries} tries each")
    print(f"  quiet: verdicts {[w for w, _, _ in quiet]} (judged by {[b for _, _, b in quiet]}); the winner: {ref}")
    same = sum(1 for w, _, _ in busy if ref and w == ref)
    wall_same = sum(1 for _, w, _ in busy if ref and w == ref)
    print(f"  beside two busy loops: the verdict resolved {ref} in {same} of {tries} "
          f"(judged by {[b for _, _, b in busy]}); wall time alone in {wall_same} of {tries}")


if __name__ == "__main__":
    main()
