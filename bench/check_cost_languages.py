"""What `memsleuth check` costs in each language people bring, beside the program alone, in one run.

For C, C++, Python, JavaScript (Node.js), Java, Go (static) and Rust, a program of about 1 s and about 10
s (bench/langs: a buffer allocated, touched and dropped per step, so every check explains
something). The programs do a fixed number of steps, calibrated here to those times alone, so a
slower run under check shows as a longer run: the wall time of `memsleuth check` over the program's
own (interleaved rounds, paired ratios) against the budget 2T + 1 s, and where check's time went:
the medians over the same rounds of the phases each check timed itself (its --verbose line: the
measured runs, the explaining runs, the symbolization, perf's fallback, the analysis and report,
the terminal output); the rest of its wall time is its start-up (the interpreter, the imports) and
its exit. A language whose runtime or compiler is missing is left out with the reason. The
symbols cache starts empty: the first round pays for naming the frames, and counts in the medians
like the others. The Python row uses the newest CPython 3.12+ found (its perf trampolines name Python functions), else
the one running this bench.

    MEMSLEUTH_TEST_FIXTURES=build/test python bench/check_cost_languages.py [--quick]

--quick leaves out the 10 s programs.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import check_budget, wall

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
    if shutil.which("rustc"):
        subprocess.run(["rustc", "-O", "-g", "-o", f"{tmp}/rs", str(HERE / "churn.rs")], check=True)
        out["Rust"] = [f"{tmp}/rs"]
    else:
        out["Rust"] = "no rustc"
    return out


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
                check_budget(f"{lang:12} ~{secs:>2} s", [*argv, str(steps_for(argv, secs))], db, ROUNDS)
    print("Target: check within 2T + 1 s in every language (OVER marks a miss).")


if __name__ == "__main__":
    main()
