"""memsleuth compare end to end: real allocators, real processes, a temporary store."""
from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from memsleuth.measure import allocators
from conftest import fixture, memsleuth, needs_tracepoints

SMALL = ["--param", "iterations=20000", "--param", "ws=100,1000"]


def _two_allocators() -> str:
    names = [a.name for a in allocators.available()]
    if len(names) < 2:
        pytest.skip("only glibc is installed: the set-up installs mimalloc/jemalloc/tcmalloc as root")
    return ",".join(names[:2])


@pytest.fixture(scope="module")
def two_way(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("e2e")
    alloc = _two_allocators()
    db, md, js = tmp / "m.db", tmp / "r.md", tmp / "r.json"
    proc = memsleuth("compare", "--alloc", alloc, *SMALL, "--reps", "6", "--db", str(db), "--md", str(md),
                     "--json", str(js))
    assert proc.returncode == 0, proc.stderr
    return alloc.split(","), db, md, js, proc


def test_report_has_throughput_evidence_and_machine(two_way):
    names, db, md, js, proc = two_way
    out = proc.stdout
    assert "Throughput" in out and "Evidence" in out
    for n in names:
        assert n in out
    assert "ops/s" in out and "fastest" in out
    text = md.read_text()
    assert text.startswith("# memsleuth compare")
    assert "| ws | allocator |" in text and "| ws=100 |" in text and "| ws=1000 |" in text
    assert "machine:" in text and "glibc" in text


@needs_tracepoints
def test_the_timed_rounds_count_no_syscall_and_take_their_warm_ups_counts(two_way):
    names, db, md, js, proc = two_way
    for cell in json.loads(js.read_text())["cells"]:
        warm = [s for s in cell["samples"] if s["warmup"] and s["round"] == -1]
        timed = [s for s in cell["samples"] if not s["warmup"]]
        assert len(warm) == 1 and warm[0]["syscalls_counted"] and warm[0]["syscalls_from"] is None
        assert sum(warm[0]["syscalls"].values()) > 0
        main = next(r for r in warm[0]["regions"] if r["name"] == "main")
        for s in timed:
            assert s["syscalls_counted"] is False and s["syscalls_from"] == "counting run"
            assert s["syscalls"] == warm[0]["syscalls"]
            assert next(r for r in s["regions"] if r["name"] == "main")["syscalls"] == main["syscalls"]
    assert "counted in each cell's warm-up" in md.read_text()


def test_json_export_has_every_sample_and_summary(two_way):
    names, db, md, js, proc = two_way
    doc = json.loads(js.read_text())
    assert doc["schema"] == "memsleuth.run/1"
    assert doc["run"]["status"] == "complete"
    assert doc["run"]["machine"]["kernel"] and doc["run"]["machine"]["cpu_model"]
    assert len(doc["cells"]) == 2 * len(names)
    for cell in doc["cells"]:
        assert cell["allocator"]["name"] in names and cell["allocator"]["path"]
        assert set(cell["params"]) >= {"iterations", "ws", "seed"}
        s = cell["summary"]
        assert s["status"] == "ok" and s["metric"] == "ops_per_s" and s["n"] == 6
        assert s["ci_low"] <= s["median"] <= s["ci_high"]
        measured = [x for x in cell["samples"] if not x["warmup"]]
        assert len(measured) == 6 and len(cell["samples"]) == 7
        for x in cell["samples"]:
            assert x["status"] == "ok"
            for key in ("wall_ns", "user_ns", "sys_ns", "minflt", "majflt", "maxrss_kb", "counters", "syscalls",
                        "regions"):
                assert key in x
            main = next(r for r in x["regions"] if r["name"] == "main")
            assert main["ops"] == 20000
            assert x["result"]["checksum"]
    # The same parameters do the same work whatever the allocator.
    by_ws = {}
    for cell in doc["cells"]:
        sums = {x["result"]["checksum"] for x in cell["samples"]}
        by_ws.setdefault(cell["params"]["ws"], set()).update(sums)
    assert all(len(v) == 1 for v in by_ws.values())


def test_rounds_are_interleaved(two_way):
    names, db, *_ = two_way
    con = sqlite3.connect(db)
    rows = con.execute("SELECT c.allocator, s.round FROM samples s JOIN cells c ON c.id = s.cell_id "
                       "WHERE s.warmup = 0 AND json_extract(c.params, '$.ws') = 100 ORDER BY s.id").fetchall()
    rounds = [r for _, r in rows]
    assert rounds == sorted(rounds), "each round finishes before the next begins"
    first_two = [json.loads(a)["name"] for a, _ in rows[:4]]
    assert set(first_two[:2]) == set(names) and first_two[:2] != first_two[2:4], "order rotates per round"


def test_show_reprints_the_stored_run(two_way):
    names, db, md, js, proc = two_way
    shown = memsleuth("show", "--db", str(db))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == proc.stdout


def test_failures_are_results_in_the_table(tmp_path):
    lib = fixture("libfx-nomalloc.so")
    db, md = tmp_path / "f.db", tmp_path / "f.md"
    proc = memsleuth("compare", "--alloc", f"glibc,broken={lib}", "--param", "iterations=5000", "--param", "ws=50",
                     "--reps", "2", "--db", str(db), "--md", str(md))
    assert proc.returncode == 0, proc.stderr
    text = md.read_text()
    assert "PRELOAD-FAILED" in text and "## Failures" in text
    assert "malloc binds to another object" in text
    # glibc's cell produced a result, so the exit is 0; --fail-on-error turns the failed cell into 3.
    again = memsleuth("compare", "--alloc", f"glibc,broken={lib}", "--param", "iterations=5000", "--param", "ws=50",
                      "--reps", "2", "--db", str(db), "--fail-on-error")
    assert again.returncode == 3, again.stderr


def test_timeout_reads_timeout(tmp_path):
    db, md = tmp_path / "t.db", tmp_path / "t.md"
    proc = memsleuth("compare", "--alloc", "glibc", "--param", "iterations=1000000000000", "--param", "ws=100",
                     "--timeout", "0.5",
                     "--reps", "3", "--db", str(db), "--md", str(md))
    assert proc.returncode == 3, proc.stderr  # no cell produced a result
    assert "TIMEOUT" in md.read_text()
    con = sqlite3.connect(db)
    counted = con.execute("SELECT count(*) FROM samples JOIN cells ON cells.id = samples.cell_id "
                          "WHERE cells.position >= 0").fetchone()[0]
    assert counted == 1, "a failed warm-up is not repeated"


def test_any_command_under_two_allocators(tmp_path):
    alloc = _two_allocators()
    db, js = tmp_path / "c.db", tmp_path / "c.json"
    code = "x = [bytearray(100) for _ in range(20000)]"
    proc = memsleuth("compare", "--alloc", alloc, "--reps", "2", "--db", str(db), "--json", str(js), "--",
                     sys.executable, "-c", code)
    assert proc.returncode == 0, proc.stderr
    assert "wall time (whole process)" in proc.stdout
    doc = json.loads(js.read_text())
    assert doc["run"]["kind"] == "command"
    for cell in doc["cells"]:
        assert cell["summary"]["metric"] == "wall_s"
        assert all(s["status"] == "ok" for s in cell["samples"])
        assert cell["command"][0] == sys.executable


def test_ctrl_c_keeps_finished_samples(tmp_path):
    db = tmp_path / "i.db"
    # SIGINT at its default in the child, whatever the suite inherited: a suite started in the
    # background by a non-interactive shell has SIGINT ignored, and Python keeps it ignored.
    proc = subprocess.Popen([sys.executable, "-m", "memsleuth", "compare", "--alloc", "glibc", "--param",
                             "iterations=3000000", "--reps", "50", "--db", str(db)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.3)
        if db.exists():
            try:
                n = sqlite3.connect(db).execute("SELECT count(*) FROM samples").fetchone()[0]
            except sqlite3.Error:
                continue
            if n >= 3:
                break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Interrupted" in out and "memsleuth show 1" in out
    con = sqlite3.connect(db)
    assert con.execute("SELECT status FROM runs").fetchone()[0] == "interrupted"
    assert con.execute("SELECT count(*) FROM samples").fetchone()[0] >= 3
    shown = memsleuth("show", "1", "--db", str(db))
    assert shown.returncode == 0 and "interrupted" in shown.stdout
    # No measured process is left behind. A Ctrl-C that lands while ms-run is being spawned leaves it
    # to its parent-death signal (ms-run then ends the tree itself), a moment after memsleuth exits.
    deadline = time.monotonic() + 10
    while True:
        ps = subprocess.run(["pgrep", "-f", "random-mixed --iterations=3000000"], capture_output=True, text=True)
        if not ps.stdout.strip() or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert ps.stdout.strip() == ""


def test_output_that_is_not_utf8_does_not_break_the_run(tmp_path):
    script = tmp_path / "binary.sh"
    script.write_text("#!/bin/sh\nprintf '\\377\\376 not utf-8 \\200\\n' >&2\n")
    script.chmod(0o755)
    db, js = tmp_path / "b.db", tmp_path / "b.json"
    proc = memsleuth("compare", "--alloc", "glibc", "--reps", "1", "--db", str(db), "--json", str(js), "--",
                     str(script))
    assert proc.returncode == 0, proc.stderr
    sample = json.loads(js.read_text())["cells"][0]["samples"][-1]
    assert sample["status"] == "ok" and "not utf-8" in sample["stderr_tail"]


def test_memory_beside_speed_with_cis(tmp_path):
    """Runs of ~70 ms (several timeline points each, even beside busy loops): the time-averaged RSS
    of every run is at most its peak, and so are the summaries, taken over the same runs."""
    js = tmp_path / "m.json"
    proc = memsleuth("compare", "--alloc", "glibc", "--param", "iterations=2000000", "--param", "ws=1000,4000",
                     "--reps", "6", "--db", str(tmp_path / "m.db"), "--json", str(js))
    assert proc.returncode == 0, proc.stderr
    assert "Memory" in proc.stdout and "time-averaged RSS [95% CI]" in proc.stdout
    for c in json.loads(js.read_text())["cells"]:
        peak, mean = c["summary"]["peak_rss_kb"], c["summary"]["mean_rss_kb"]
        assert peak["n"] == 6 and peak["ci_low"] <= peak["median"] <= peak["ci_high"]
        if mean is not None:       # present only when every run had two timeline points
            assert mean["n"] == peak["n"]
            assert mean["median"] <= peak["median"] and mean["ci_low"] <= peak["ci_low"]
            assert mean["ci_high"] <= peak["ci_high"]
        for smp in c["samples"]:
            rows = (smp.get("timeline") or {}).get("rows") or []
            assert all(r[1] <= smp["maxrss_kb"] for r in rows)     # the peak is at least every point
