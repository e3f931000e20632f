"""Run history, the regression gate and the exports, end to end on real runs."""
from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest

from conftest import fixture, memsleuth

SMALL = ["--param", "ws=400", "--param", "iterations=1000000", "--reps", "10"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Run 1 and 2: the same setup; run 3: the same allocator made slower by a known spin per malloc."""
    db = tmp_path_factory.mktemp("gate") / "g.db"
    spin = fixture("libfx-spin.so")
    for extra in ([], [], ["--env", "MEMSLEUTH_FIXTURE_SPIN=200"]):
        proc = memsleuth("compare", "--db", str(db), "--alloc", f"x={spin}", *SMALL, *extra)
        assert proc.returncode == 0, proc.stderr
    return db


def test_diff_resolves_a_known_regression_and_exits_1(runs, tmp_path):
    md = tmp_path / "pr.md"
    proc = memsleuth("diff", "1", "3", "--db", str(runs), "--md", str(md))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "REGRESSION: B is" in proc.stdout and "x slower" in proc.stdout
    text = md.read_text()
    assert text.startswith("# memsleuth diff") and "| cell | A | B |" in text and "REGRESSION" in text


def test_diff_of_the_same_setup_resolves_nothing_and_exits_0(runs):
    # Separate runs do not cancel a shift of the whole machine: on this project's VM, 1 of 8
    # identical pairs differed by 1.16x [1.10, 1.19] (docs/statistics.md). The threshold is set
    # above that measured shift; the regression test above keeps the default 5%.
    proc = memsleuth("diff", "1", "2", "--threshold", "25%", "--db", str(runs))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Inside the threshold, or too wide to say: worded apart, and never a verdict.
    assert "no change beyond ±25%" in proc.stdout or "unresolved: the CI" in proc.stdout
    assert "No regression resolved" in proc.stdout


def test_diff_improvement_is_not_a_regression(runs):
    proc = memsleuth("diff", "3", "1", "--db", str(runs))
    assert proc.returncode == 0
    assert "x faster" in proc.stdout


def test_history_lists_every_run(runs):
    proc = memsleuth("history", "--db", str(runs))
    assert proc.returncode == 0
    for rid in ("1", "2", "3"):
        assert f"│  {rid} │" in proc.stdout or f"│ {rid} │" in proc.stdout
    assert "MEMSLEUTH_FIXTURE_SPIN=200" in proc.stdout


def test_export_csv_has_one_row_per_sample(runs):
    proc = memsleuth("export", "1", "--format", "csv", "--db", str(runs))
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert len(rows) == 11  # 1 warm-up + 10 rounds
    assert {r["warmup"] for r in rows} == {"0", "1"}
    assert all(r["status"] == "ok" and float(r["ops_per_s"]) > 0 and r["main_ops"] == "1000000" for r in rows)


def test_export_json_matches_the_schema_id(runs):
    proc = memsleuth("export", "2", "--db", str(runs))
    assert json.loads(proc.stdout)["schema"] == "memsleuth.run/1"


def test_export_pyperf_is_read_by_pyperf_compare_to(runs, tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for rid, path in (("1", a), ("3", b)):
        proc = memsleuth("export", rid, "--format", "pyperf", "--output", str(path), "--db", str(runs))
        assert proc.returncode == 0, proc.stderr
    out = subprocess.run([sys.executable, "-m", "pyperf", "compare_to", str(a), str(b)], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    assert "slower" in out.stdout


def test_export_pyperf_needs_a_file(runs):
    proc = memsleuth("export", "1", "--format", "pyperf", "--db", str(runs))
    assert proc.returncode == 2 and "--output" in proc.stderr


def test_adaptive_rounds_stop_at_the_target_or_the_maximum(tmp_path):
    db, js = tmp_path / "a.db", tmp_path / "a.json"
    proc = memsleuth("compare", "--db", str(db), "--json", str(js), "--alloc", "glibc", "--param", "ws=100",
                     "--param", "iterations=50000", "--target-ci", "50%", "--min-reps", "6", "--max-reps", "12")
    assert proc.returncode == 0, proc.stderr
    cell = json.loads(js.read_text())["cells"][0]
    # Between the minimum and the maximum, and stopped only once the target was met (a loaded machine
    # may need more than the minimum: the stopping rule itself is tested on stored values in
    # tests/unit/test_stats.py).
    n, hw = cell["summary"]["n"], cell["summary"]["ci_half_width"]
    assert 6 <= n <= 12 and (n == 12 or hw <= 0.5), (n, hw)
    proc = memsleuth("compare", "--db", str(db), "--json", str(js), "--alloc", "glibc", "--param", "ws=100",
                     "--param", "iterations=50000", "--target-ci", "0.0001%", "--max-reps", "8")
    cell = json.loads(js.read_text())["cells"][0]
    assert cell["summary"]["n"] == 8 and "target not reached" in proc.stdout
    assert any("did not reach" in w for w in cell["summary"]["warnings"])
