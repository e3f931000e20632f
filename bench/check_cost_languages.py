"""What `memsleuth check` costs in each language people bring, beside the program alone, in one run.

For C, C++, Python, JavaScript (Node.js), Java and Go (static), a program of about 1 s and about 10
s (bench/langs: a buffer allocated, touched and dropped per step, so every check explains
something). The programs do a fixed number of steps, calibrated here to those times alone, so a
slower run under check shows as a longer run: the wall time of `memsleuth check` over the program's
own (interleaved rounds, paired ratios) against the budget 2T + 1 s, and where check's extra time
went, measured in this process the way check spends it: the measured run, the explaining run (heap
accounting, call sites, syscall arguments, CPU samples, as check asks for them) and, inside it, the
symbolization; the rest is check's start-up, its analysis and its report. A language whose runtime
or compiler is missing is left out with the reason. The symbols cache starts empty (the first round
pays for naming the frames; the medians are of later rounds, as a user's second check is). The
Python row uses the newest CPython 3.12+ found (its perf trampolines name Python functions), else
the one running this bench.

    MEMSLEUTH_TEST_FIXTURES=build/test python bench/check_cost_languages.py [--quick]

--quick leaves out the 10 s programs.
"""
from __future__ import annotations

import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import Holder, interleave, ratio_line, wall

from memsleuth.measure import allocators, launcher, runner, where
from memsleuth.records import symbols
from memsleuth.measure.plan import Cell

ROUNDS = 3
HERE = Path(__file__).resolve().parent / "langs"


def steps_for(argv: list[str], seconds: float) -> int:
    """The step count that makes the program take about `seconds` alone: two short runs give its
    start-up and its time per step."""
    few = 4
    while True:
        t1 = min(wall([*argv, str(few)]) for _ in range(2))
        if t1 >= 0.25 or few >= 4096:
            break
        few *= 2
    t4 = min(wall([*argv, str(4 * few)]) for _ in range(2))
    per_step = max((t4 - t1) / (3 * few), 1e-6)
    start = max(t1 - few * per_step, 0.0)
    return max(1, round((seconds - start) / per_step))


def check_wall(argv: list[str], db: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "memsleuth", "check", "--db", db, "--", *argv],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t0


def python() -> str:
    for name in ("python3.14", "python3.13", "python3.12"):
        for found in [shutil.which(name), *sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/3.1*/bin/{name}")))]:
            if found and subprocess.run([found, "-c", "import sys; sys.exit(sys.version_info < (3, 12))"],
                                        capture_output=True).returncode == 0:
                return found
    return sys.executable


def build(tmp: str) -> dict[str, list[str] | str]:
    """{language: argv without the seconds, or why it is left out}."""
    out: dict[str, list[str] | str] = {}
    for lang, compiler, argv in (("C", "gcc", ["gcc", "-O2", "-g", "-o", f"{tmp}/c", str(HERE / "churn.c")]),
                                 ("C++", "g++", ["g++", "-O2", "-g", "-o", f"{tmp}/cc", str(HERE / "churn.cc")])):
        if shutil.which(compiler) is None:
            out[lang] = f"no {compiler}"
        else:
            subprocess.run(argv, check=True)
            out[lang] = [argv[argv.index("-o") + 1]]
    out["Python"] = [python(), str(HERE / "churn.py")]
    out["JavaScript"] = [shutil.which("node")] + [str(HERE / "churn.js")] if shutil.which("node") else "no node"
    if shutil.which("javac") and shutil.which("java"):
        subprocess.run(["javac", "-d", tmp, str(HERE / "Churn.java")], check=True)
        out["Java"] = [shutil.which("java"), "-cp", tmp, "Churn"]
    else:
        out["Java"] = "no JDK"
    go = shutil.which("go")
    if go:
        d = Path(tmp) / "go"
        d.mkdir()
        shutil.copy(HERE / "churn.go", d / "main.go")
        (d / "go.mod").write_text("module churn\n\ngo 1.19\n")
        env = {**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GOCACHE": str(d / "cache"),
               "GOPATH": str(d / "gopath"), "HOME": str(d)}
        subprocess.run([go, "build", "-o", str(d / "churn"), "."], cwd=d, env=env, check=True)
        out["Go (static)"] = [str(d / "churn")]
    else:
        out["Go (static)"] = "no Go toolchain"
    return out


def breakdown(argv: list[str]) -> dict[str, float]:
    """The measured run, the explaining run and its symbolization, as check makes them (seconds)."""
    cell = Cell(allocators.glibc(), {}, tuple(argv))
    t0 = time.perf_counter()
    first = launcher.run_cell(cell, timeout_s=600, mem_limit_bytes=None)
    measured = time.perf_counter() - t0
    counts = runner.site_counts([first])
    periods = where.periods(counts) if runner.needs_call_sites([first]) or runner.needs_cpu_profile([first]) else {}
    spent = [0.0]
    real = symbols.symbolize

    def timed(*a, **k):
        t = time.perf_counter()
        try:
            return real(*a, **k)
        finally:
            spent[0] += time.perf_counter() - t

    symbols.symbolize = timed
    try:
        t0 = time.perf_counter()
        s = launcher.run_cell(cell, timeout_s=600, mem_limit_bytes=None, syscall_args=True,
                              heap=runner.needs_heap([first]), sites=periods or None,
                              args_every=runner.args_every(counts), cpu_sample_us=runner.cpu_sample_us([first]))
        explaining = time.perf_counter() - t0
    finally:
        symbols.symbolize = real
    fallback = 0.0
    if periods and "unavailable" in (s.where or {"unavailable": ""}):
        t0 = time.perf_counter()
        where.record(list(argv), {}, None, counts, 600)
        fallback = time.perf_counter() - t0
    return {"measured": measured, "explaining": explaining, "symbolizing": spent[0], "perf fallback": fallback}


def main() -> None:
    quick = "--quick" in sys.argv[1:]
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_CACHE_HOME"] = f"{tmp}/cache"   # the symbols cache starts empty: round 1 fills it
        db = f"{tmp}/c.db"
        chosen = os.environ.get("BENCH_LANGS")      # e.g. JavaScript,Java
        for lang, argv in build(tmp).items():
            if chosen and lang not in chosen.split(","):
                continue
            if isinstance(argv, str):
                print(f"{lang:12} left out: {argv}", flush=True)
                continue
            for secs in (1, 10)[:1 if quick else 2]:
                cmd = [*argv, str(steps_for(argv, secs))]
                got = interleave({"program": lambda a=cmd: wall(a), "check": lambda a=cmd: check_wall(a, db)}, ROUNDS)
                t, c = statistics.median(got["program"]), statistics.median(got["check"])
                budget = 2 * t + 1
                with Holder(args=True):      # as the runner holds the tracepoints for its explaining runs
                    parts = breakdown(cmd)
                rest = c - parts["measured"] - parts["explaining"] - parts["perf fallback"]
                print(f"{lang:12} ~{secs:>2} s: program {t:6.2f} s, check {c:6.2f} s, budget {budget:6.2f} s: "
                      f"{'within' if c <= budget else 'OVER'}; " + ratio_line("check / program", got["check"],
                                                                              got["program"]), flush=True)
                print(f"{'':12}        measured run {parts['measured']:.2f} s, explaining run {parts['explaining']:.2f} s "
                      f"(of which symbolizing {parts['symbolizing']:.2f} s), perf-record fallback "
                      f"{parts['perf fallback']:.2f} s, start-up + analysis + report {rest:.2f} s", flush=True)
    print("Target: check within 2T + 1 s in every language (OVER marks a miss).")


if __name__ == "__main__":
    main()
