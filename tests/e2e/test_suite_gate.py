"""compare --suite (one summary table over every allocator workload) and the reference cell that
lets diff divide a shift of the whole machine out of two runs."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from memsleuth.analysis import regression
from memsleuth.measure import workloads
from conftest import fixture, memsleuth


def test_suite_runs_every_workload_and_ends_with_one_table(tmp_path):
    js, md = tmp_path / "s.json", tmp_path / "s.md"
    proc = memsleuth("compare", "--suite", "--alloc", "glibc", "--reps", "1", "--no-reference", "--db",
                     str(tmp_path / "s.db"), "--json", str(js), "--md", str(md), timeout=600)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(js.read_text())
    assert doc["schema"] == "memsleuth.suite/1"
    assert [r["run"]["name"] for r in doc["runs"]] == [w.name for w in workloads.SUITE]
    cols = doc["summary"]["columns"]
    assert cols[0] == "allocator" and cols[1:-1] == [w.name for w in workloads.SUITE] and cols[-1] == "geometric mean"
    (row,) = doc["summary"]["rows"]
    assert row[0] == "glibc" and all(v.startswith("1.00x") for v in row[1:])   # alone, it is every fastest
    for w in workloads.SUITE:   # each workload ran with its suite parameters, nothing swept
        run = next(r for r in doc["runs"] if r["run"]["name"] == w.name)
        (cell,) = run["cells"]
        for k, v in (w.suite or {}).items():
            assert cell["params"][k] == v
    assert "Allocator suite" in proc.stdout and "Allocator suite" in md.read_text()


@pytest.mark.parametrize("extra,word", [(["--workload", "server"], "--workload"), (["--param", "ws=4"], "--param"),
                                        (["--", "true"], "a command")])
def test_suite_refuses_what_it_would_ignore(tmp_path, extra, word):
    proc = memsleuth("compare", "--suite", *extra, "--db", str(tmp_path / "x.db"))
    assert proc.returncode == 2 and word in proc.stderr


def _cell(costs: dict[int, float]):
    """A CellSummary stand-in with time-per-op metrics by round."""
    samples = [(r, SimpleNamespace(metric=lambda kind, v=v: 1.0 / v)) for r, v in costs.items()]
    return SimpleNamespace(ok_samples=samples, metric="ops_per_s", higher_is_better=True)


def test_normalised_costs_divide_each_round_by_its_reference():
    c = _cell({0: 2.0, 1: 4.0, 2: 3.0})
    assert regression.normalised_costs(c, {0: 1.0, 1: 2.0}) == pytest.approx([2.0, 2.0])   # round 2 has none


def test_diff_reads_the_normalised_change_and_shows_the_reference(tmp_path):
    db = str(tmp_path / "g.db")
    spin = f"spin={fixture('libfx-spin.so')}"
    # B spins in every malloc: several times slower per op, an effect no load on the machine hides.
    for n in ("0", "400"):
        proc = memsleuth("compare", "--alloc", spin, "--param", "ws=400", "--param", "iterations=200000", "--reps", "6",
                         "--env", f"MEMSLEUTH_FIXTURE_SPIN={n}", "--db", db)
        assert proc.returncode == 0, proc.stderr
    md = tmp_path / "d.md"
    proc = memsleuth("diff", "1", "2", "--db", db, "--md", str(md))
    assert proc.returncode == 1, proc.stdout
    text = md.read_text()
    assert "reference cell" in text and "normalised change" in text and "REGRESSION" in text
    from memsleuth.records.store import Store
    st = Store(db, readonly=True)
    a, b = st.load_run(1), st.load_run(2)
    assert a.reference is not None and len(a.reference.measured()) == 6
    assert all(c.position >= 0 for c in a.cells)   # the reference is never a compared cell
    (ch,) = regression.compare_runs(a, b, 0.05)
    assert ch.normalised is not None and ch.normalised.median > 1.05


def test_without_the_reference_diff_says_the_shift_is_not_cancelled(tmp_path):
    db = str(tmp_path / "n.db")
    for _ in range(2):
        proc = memsleuth("compare", "--alloc", "glibc", "--param", "ws=400", "--param", "iterations=50000", "--reps",
                         "3", "--no-reference", "--db", db)
        assert proc.returncode == 0, proc.stderr
    proc = memsleuth("diff", "1", "2", "--db", db)
    assert "neither run has the reference cell" in " ".join(proc.stdout.split())
