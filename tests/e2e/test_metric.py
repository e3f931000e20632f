"""compare on any benchmark's own figure (--metric) and on a command's swept arguments (--param
with {KEY} placeholders)."""
from __future__ import annotations

import json

from memsleuth.measure import allocators
from conftest import memsleuth

# A benchmark that runs for a fixed time and prints its throughput; it "runs faster" (prints
# twice the figure) when something is preloaded, and scales with its {n} argument.
BENCH = ("sleep 0.2; if [ -n \"$LD_PRELOAD\" ]; then echo \"throughput $((200*{n})) ops/s\"; "
         "else echo \"throughput $((100*{n})) ops/s\"; fi")


def _two():
    other = next((a.name for a in allocators.available() if a.preload), None)
    return f"glibc,{other}" if other else "glibc"


def test_metric_is_read_from_the_output_and_params_fill_the_command(tmp_path):
    js = tmp_path / "m.json"
    proc = memsleuth("compare", "--alloc", _two(), "--reps", "6", "--db", str(tmp_path / "m.db"), "--json", str(js),
                     "--metric", "tput=throughput ([0-9]+) ops/s:higher", "--param", "n=1,3", "--", "sh", "-c", BENCH)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(js.read_text())
    medians = {(c["allocator"]["name"], c["params"]["n"]): c["summary"]["median"] for c in doc["cells"]}
    assert medians[("glibc", "1")] == 100 and medians[("glibc", "3")] == 300
    assert all(c["summary"]["metric"] == "output" for c in doc["cells"])
    if "," in _two():
        other = _two().split(",")[1]
        assert medians[(other, "1")] == 200
        glibc = next(c for c in doc["cells"] if c["allocator"]["name"] == "glibc" and c["params"]["n"] == "1")
        assert glibc["summary"]["verdict"].startswith("2.00x slower")
    assert "tput (printed by the program, higher is better)" in proc.stdout


def test_lower_is_better_metrics_rank_the_other_way(tmp_path):
    js = tmp_path / "l.json"
    proc = memsleuth("compare", "--alloc", _two(), "--reps", "6", "--db", str(tmp_path / "l.db"), "--json", str(js),
                     "--metric", "time=throughput ([0-9]+):lower", "--param", "n=1", "--", "sh", "-c", BENCH)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(js.read_text())
    best = next(c for c in doc["cells"] if c["summary"]["is_best"])
    assert best["allocator"]["name"] == "glibc"


def test_unmatched_output_is_a_recorded_error(tmp_path):
    proc = memsleuth("compare", "--alloc", "glibc", "--reps", "2", "--db", str(tmp_path / "u.db"),
                     "--metric", "tput=nothing like this ([0-9]+)", "--", "echo", "hello")
    assert proc.returncode == 3, proc.stderr
    assert "no match for --metric" in proc.stdout and "Traceback" not in proc.stderr


def test_a_fixed_wall_time_gets_a_warning_that_names_metric(tmp_path):
    # A second of sleep: the shell's start-up under either allocator, even on a loaded machine, is
    # well inside 2% of it.
    proc = memsleuth("compare", "--alloc", _two(), "--reps", "6", "--warmup", "0", "--db", str(tmp_path / "w.db"),
                     "--param", "n=1",
                     "--", "sh", "-c", BENCH.replace("sleep 0.2", "sleep 1.0"))
    assert proc.returncode == 0, proc.stderr
    if "," in _two():
        assert "--metric" in proc.stdout and "fixed time" in proc.stdout


def test_bad_metric_and_param_input(tmp_path):
    db = str(tmp_path / "b.db")
    for args, needle in ((["--metric", "x"], "NAME=REGEX"), (["--metric", "x=([0-9"], "does not compile"),
                         (["--metric", "x=[0-9]+"], "needs a group"), (["--param", "n=1", "--"], "not used"),
                         (["--param", "n=", "--"], "no values")):
        cmd = ["compare", "--db", db, *args]
        cmd += ["echo", "1"] if cmd[-1] == "--" else ["--", "echo", "1"]
        proc = memsleuth(*cmd)
        assert proc.returncode == 2 and needle in proc.stderr, (args, proc.stderr)
    proc = memsleuth("compare", "--db", db, "--metric", "x=([0-9]+)")
    assert proc.returncode == 2 and "command after --" in proc.stderr


def test_a_higher_is_better_figure_is_also_given_per_cpu_second(tmp_path):
    js = tmp_path / "c.json"
    # A fixed-duration loop: it counts what it does in 0.3 s of wall time and prints the count.
    loop = ("import time; t = time.perf_counter(); n = 0\n"
            "while time.perf_counter() - t < 0.3: n += 1\n"
            "print(f'ops {n}')")
    proc = memsleuth("compare", "--alloc", _two(), "--reps", "6", "--db", str(tmp_path / "c.db"), "--json", str(js),
                     "--metric", "ops=ops ([0-9]+):higher", "--", "python3", "-c", loop)
    assert proc.returncode == 0, proc.stderr
    for c in json.loads(js.read_text())["cells"]:
        per_cpu = c["summary"]["per_cpu_second"]
        samples = [s for s in c["samples"] if not s["warmup"] and s["status"] == "ok"]
        cpu_s = sorted((s["user_ns"] + s["sys_ns"]) / 1e9 for s in samples)[len(samples) // 2]
        # The count per CPU-second: the count over the run's CPU time (order of magnitude check).
        assert per_cpu is not None and 0.3 < per_cpu["median"] * cpu_s / c["summary"]["median"] < 3
    assert "per CPU-second" in proc.stdout
