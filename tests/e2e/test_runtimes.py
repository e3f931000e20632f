"""Programs in the runtimes users bring (issue 32's corpus): a statically linked Go program, a
Node.js handler, NumPy temporaries under CPython. Each has one true mechanism, made by the
runtime's own code; `check` must name it, name the runtime as the culprit, give only advice that
can apply, and state a cost within 0.75-1.33x of `perf record` on the same program in the same
test (the program's structure says which of perf's classes the mechanism's cost is). A runtime
that is not installed skips with the reason."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import needs_tracepoints
from test_measured_costs import check, findings_of, perf_shares, within

HERE = Path(__file__).resolve().parent / "runtimes"
pytestmark = [needs_tracepoints,
              pytest.mark.skipif(shutil.which("perf") is None, reason="perf (linux-perf) is not installed")]


def go_build(d: Path, source: str) -> str:
    """A static Go program from tests/e2e/runtimes (skips without a Go toolchain)."""
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go") else None)
    if go is None:
        pytest.skip("no Go toolchain (golang-go)")
    shutil.copy(HERE / source, d / "main.go")
    (d / "go.mod").write_text("module prog\n\ngo 1.19\n")
    env = {**os.environ, "CGO_ENABLED": "0", "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod", "GOCACHE": str(d / "cache"),
           "GOPATH": str(d / "gopath"), "HOME": str(d)}
    out = subprocess.run([go, "build", "-o", str(d / "prog"), "."], cwd=d, env=env, capture_output=True, text=True,
                         timeout=300)
    if out.returncode != 0:
        pytest.skip(f"go build failed here: {out.stderr.strip()[-300:]}")
    return str(d / "prog")


def node() -> str:
    found = shutil.which("node") or shutil.which("nodejs")
    if found is None:
        pytest.skip("no JavaScript runtime (nodejs)")
    return found


@pytest.fixture(scope="module")
def gcjob(tmp_path_factory):
    return go_build(tmp_path_factory.mktemp("gcjob"), "gcjob.go")


def test_a_static_go_program_purging_its_heap_per_job(tmp_path, gcjob):
    doc = check(tmp_path, gcjob)
    ref = perf_shares(tmp_path, gcjob)
    f = findings_of(doc)["madvise-storm"]
    assert f["who"] == "runtime" and f["numbers"]["runtime"] == "the Go runtime", (f["who"], f["evidence"])
    # every job after the first faults in again what FreeOSMemory purged: the calls and the faults
    assert within(f["cost_share"], ref.get("madvise", 0) + ref["page-faults"]), (f["title"], ref)
    assert "GODEBUG=madvdontneed=0" in f["advice"]
    # a static binary with its own heap: no allocator and no glibc tunable can change it
    for x in findings_of(doc).values():
        assert "GLIBC_TUNABLES" not in x["advice"] and "allocator" not in x["advice"].split(";")[0], x["advice"]
    assert "lock-contention" not in findings_of(doc)          # its scheduler's futexes are not a contended lock


def test_a_node_handler_allocating_a_64_mib_buffer_per_request(tmp_path):
    cmd = [node(), str(HERE / "buffers.js")]
    doc = check(tmp_path, *cmd)
    ref = perf_shares(tmp_path, *cmd)
    f = findings_of(doc)["mmap-churn"]
    assert f["who"] == "runtime" and f["numbers"]["runtime"] == "V8 (Node.js)", (f["who"], f["evidence"])
    assert within(f["cost_share"], ref.get("munmap", 0) + ref.get("mmap", 0) + ref["page-faults"]), (f["title"], ref)
    # calloc maps each 64 MiB buffer: raising mmap_threshold cannot keep it (its ceiling is 32 MiB)
    assert "glibc.malloc.mmap_threshold=" not in f["advice"] and "mmap_max=0" in f["advice"], f["advice"]
    assert "mmap_threshold=32M" not in doc["_stdout"]


def test_numpy_temporaries_of_64_mib_per_step(tmp_path):
    try:
        import numpy  # noqa: F401
    except ImportError:
        pytest.skip("numpy is not installed (make setup installs it)")
    cmd = [sys.executable, str(HERE / "temporaries.py")]
    doc = check(tmp_path, *cmd)
    ref = perf_shares(tmp_path, *cmd)
    f = findings_of(doc)["mmap-churn"]
    assert f["who"] == "runtime" and f["numbers"]["runtime"] == "CPython", (f["who"], f["evidence"])
    assert within(f["cost_share"], ref.get("munmap", 0) + ref.get("mmap", 0) + ref["page-faults"]), (f["title"], ref)
    assert "out=" in f["advice"]


def test_cpp_temporaries_of_64_mib_per_step(tmp_path):
    if shutil.which("g++") is None:
        pytest.skip("no C++ compiler (g++)")
    prog = tmp_path / "temporaries"
    subprocess.run(["g++", "-O2", "-g", "-o", str(prog), str(HERE / "temporaries.cc")], check=True, timeout=120)
    doc = check(tmp_path, str(prog))
    ref = perf_shares(tmp_path, str(prog))
    f = findings_of(doc)["mmap-churn"]
    assert f["who"] == "allocator", (f["who"], f["evidence"])        # operator new -> malloc maps, free unmaps
    assert within(f["cost_share"], ref.get("munmap", 0) + ref.get("mmap", 0) + ref["page-faults"]), (f["title"], ref)
    assert "mmap_max=0" in f["advice"]


@pytest.mark.parametrize("runtime", ["go", "node", "python"])
def test_clean_programs_in_each_runtime_get_no_finding_above_low(tmp_path, runtime):
    cmd = {"go": lambda: [go_build(tmp_path, "clean.go")], "node": lambda: [node(), str(HERE / "clean.js")],
           "python": lambda: [sys.executable, "-c", "print(sum(i * i % 7 for i in range(3 * 10**6)))"]}[runtime]()
    doc = check(tmp_path, *cmd)
    loud = [(f["id"], f["confidence"], f["title"]) for f in findings_of(doc).values() if f["confidence"] != "low"]
    assert not loud, loud
