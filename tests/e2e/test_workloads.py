"""The allocator workloads (docs/workloads.md): each program's parameters, bad values, self-check,
latency histogram and harness region, run for real; each under every installed allocator."""
from __future__ import annotations

import json
import subprocess

import pytest

from memsleuth.measure import allocators, native, workloads
from conftest import memsleuth

# Small parameters per workload: seconds, not minutes, under every allocator.
SMALL = {
    "random-mixed": ["iterations=20000", "ws=400"],
    "cross-thread": ["iterations=20000", "threads=1"],
    "server": ["iterations=20000", "threads=2", "slots=500"],
    "false-sharing": ["iterations=5000", "threads=2", "mode=passive"],
    "fragmentation": ["phases=4", "count=5000", "live-max=1048576"],
    "big-blocks": ["iterations=40", "ws=4", "max-size=4194304"],
    "realloc-growth": ["iterations=20", "final-size=65536", "growth=double"],
    "threads-stress": ["iterations=5000", "threads=3"],
}


def run_program(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(native.native_path(workloads.get(name).program)), *args], capture_output=True,
                          text=True, timeout=120)


def test_every_suite_workload_has_small_parameters_here():
    assert set(SMALL) == {w.name for w in workloads.SUITE}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_program_reports_counts_latency_and_a_harness_region(name):
    proc = run_program(name, *(f"--{kv}" for kv in SMALL[name]))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    assert doc["workload"] == name and doc["ops"] > 0
    assert int(doc["checksum"], 16) > 0
    lat = doc["latency"]
    assert lat["every"] >= 1 and lat["timer_ns"] >= 0
    timed = sum(h["n"] for h in lat["ops"].values())
    assert timed > 0
    for h in lat["ops"].values():
        assert sum(c for _, c in h["buckets"]) == h["n"]
        assert h["buckets"][-1][0] >= h["max"] * 0.87   # the top bucket's upper edge holds the max
    assert 'region "harness"' in proc.stderr and 'region "main"' in proc.stderr


@pytest.mark.parametrize("name", sorted(SMALL))
def test_the_checksum_depends_on_the_parameters_only(name):
    args = [f"--{kv}" for kv in SMALL[name]]
    a = json.loads(run_program(name, *args).stdout.strip().splitlines()[-1])
    b = json.loads(run_program(name, *args, "--latency-every=0", "--harness-ops=0"
                               if name != "fragmentation" else "--harness-phases=0").stdout.strip().splitlines()[-1])
    c = json.loads(run_program(name, *args, "--seed=7").stdout.strip().splitlines()[-1])
    assert a["checksum"] == b["checksum"]
    assert b["latency"]["ops"] == {}
    if name not in ("false-sharing", "realloc-growth"):   # no random choices: the seed changes nothing
        assert a["checksum"] != c["checksum"]


@pytest.mark.parametrize("name,arg,message", [
    ("cross-thread", "--threads=0", "--threads must be an integer in [1, 512]"),
    ("server", "--min-size=8", "--min-size must be an integer in [24,"),
    ("false-sharing", "--mode=both", "--mode must be one of active passive"),
    ("fragmentation", "--keep=0", "--keep must be an integer"),
    ("big-blocks", "--touch=some", "--touch must be one of pages ends"),
    ("realloc-growth", "--growth=triple", "--growth must be one of add double"),
    ("threads-stress", "--nonsense=1", "unknown argument '--nonsense=1'"),
    ("random-mixed", "--latency-every=-1", "--latency-every must be an integer"),
])
def test_programs_refuse_bad_values_in_one_line(name, arg, message):
    proc = run_program(name, arg)
    assert proc.returncode == 2
    own = [line for line in proc.stderr.splitlines() if not line.startswith("memsleuth probe:")]
    assert message in proc.stderr and len(own) == 1


@pytest.mark.parametrize("name,lo,hi", [("cross-thread", "min-size", "max-size"),
                                        ("realloc-growth", "start-size", "final-size"),
                                        ("big-blocks", "min-size", "max-size")])
def test_programs_refuse_an_inverted_size_range(name, lo, hi):
    proc = run_program(name, f"--{lo}=4096", f"--{hi}=1024")
    assert proc.returncode == 2 and "must not exceed" in proc.stderr


@pytest.mark.parametrize("param,message", [
    ("threads=0", "must be in [1, 512]"),
    ("max-size=3Q", "must be a size like"),
    ("queue=lots", "must be an integer"),
    ("colour=red", "unknown parameter 'colour'"),
])
def test_compare_refuses_bad_parameters_before_running(tmp_path, param, message):
    proc = memsleuth("compare", "--workload", "cross-thread", "--param", param, "--db", str(tmp_path / "x.db"))
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_allocator_runs_every_workload_with_its_self_check_passing(tmp_path, name):
    """Done-when of issue 13: each cell ok under glibc, mimalloc, jemalloc, tcmalloc and tbbmalloc
    (those installed), and the checksums agree across allocators."""
    js = tmp_path / "w.json"
    params = [a for kv in SMALL[name] for a in ("--param", kv)]
    proc = memsleuth("compare", "--workload", name, *params, "--reps", "1", "--no-reference", "--db",
                     str(tmp_path / "w.db"), "--json", str(js), timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(js.read_text())
    names = {c["allocator"]["name"] for c in doc["cells"]}
    assert names == {a.name for a in allocators.available()}
    for c in doc["cells"]:
        assert c["summary"]["status"] == "ok", (c["label"], [s.get("stderr_tail") for s in c["samples"]])
        assert not c["summary"]["checksum_mismatch"]
        assert c["summary"]["latency"], c["label"]
        assert c["summary"]["harness_ns_per_op"] is not None
    checksums = {s["result"]["checksum"] for c in doc["cells"] for s in c["samples"] if s.get("result")}
    assert len(checksums) == 1
    assert "Latency" in proc.stdout and "Cost per operation" in proc.stdout
