"""Report builders on a stored run (pyperf's way: tests read a stored result file, no process):
tests/data/compare-random-mixed.db is a real `memsleuth compare --reps 6 --param ws=400,40000` of
the five allocators on this project's VM (2026-11-23), with no mechanism finding."""
from __future__ import annotations

import io
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from memsleuth.analysis.summary import analyse_run
from memsleuth.analysis import regression
from memsleuth.report import builders, markdown, terminal, wording
from memsleuth.report.builders import compare, machines
from memsleuth.records.store import Store

DATA = Path(__file__).resolve().parents[1] / "data" / "compare-random-mixed.db"


@pytest.fixture()
def run(tmp_path):
    db = tmp_path / "r.db"
    shutil.copy(DATA, db)        # the store may write its WAL files beside it: never in tests/data
    st = Store(str(db), readonly=True)
    yield st.load_run(1)
    st.close()


def test_the_answer_comes_first_and_says_only_what_is_resolved(run):
    analysed = analyse_run(run)
    a = SimpleNamespace(groups=analysed.groups, answer=wording.compare_answer(analysed.standings))
    assert a.answer and a.answer[0].startswith("Fastest, resolved by paired rounds: ")
    for g in a.groups:
        best = next(c for c in g.cells if c.is_best)
        named = f"{best.cell.contender} at ws={g.params['ws']}"
        assert (named in " ".join(a.answer)) == best.best_resolved
        if not best.best_resolved:
            continue
        part = a.answer[0][a.answer[0].index(best.cell.contender + " at "):]
        part = part[:part.index(")")]
        for c in g.cells:   # an allocator not resolved slower than the best is named as such
            if c is not best and c.verdict.kind != "slower":
                assert c.cell.contender in part.split("not resolved from")[-1], part
    out = io.StringIO()
    terminal.render(builders.for_run(run), Console(file=out, width=1000, color_system=None))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("memsleuth compare") and lines[1] == a.answer[0]
    assert markdown.render(builders.for_run(run)).splitlines()[2] == "**" + markdown.escape(a.answer[0]) + "**  "


def test_a_run_without_a_material_mechanism_gets_one_line(run):
    a = analyse_run(run)
    assert a.quiet and a.quiet.startswith("No memory mechanism costs 5% of any cell's CPU time in region main")
    mechanisms = [f for f in a.all_findings if f.id not in ("counters-unavailable", "unstable-measurement")]
    assert mechanisms == []


def test_noise_speaks_once(run):
    a = analyse_run(run)
    unstable = [f for f in a.all_findings if f.id == "unstable-measurement"]
    assert len(unstable) <= 1
    assert not any(f.id == "unstable-measurement" for g in a.groups for c in g.cells for f in c.findings)


@pytest.mark.parametrize("width", [80, 100, 120])
def test_tables_fit_the_terminal_without_splitting_a_number(run, width):
    report = builders.for_run(run)
    out = io.StringIO()
    terminal.render(report, Console(file=out, width=width, color_system=None))
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= width
    flat = " ".join(text.split())          # lines joined: a token wrapped whole survives, a split one does not
    for t in report.tables:
        for row in t.rows:
            for cell in row:
                for token in cell.split():
                    assert token in flat, (t.title, token)


def test_two_runs_of_one_machine_are_said_to_be_one_machine_and_never_paired(run):
    runs, analyses = [run, run], [analyse_run(run), analyse_run(run)]
    keys, matrix = regression.compare_machines(runs, analyses)
    report = machines.build(runs, keys, matrix, regression.same_cells(runs, analyses))
    assert any(h.startswith("WARNING: runs 1 and 1 have the same machine fingerprint") for h in report.header)
    by_machine = report.tables[0]
    assert "never paired" in by_machine.notes[0]
    across = [row[4] for row in by_machine.rows if row[4] != "fastest machine"]
    assert across and all("normalised by each run's reference: no difference resolved" in a for a in across)
    assert "separate runs" in report.figures[0].caption


def test_heatmap_text_contrasts_with_its_cell():
    from matplotlib import colormaps
    from memsleuth.report.html import _text_on
    cmap = colormaps["RdYlGn_r"]
    assert _text_on(cmap(1.0)) == "white"      # dark red: the slowest
    assert _text_on(cmap(0.5)) == "black"      # pale yellow
    assert _text_on(cmap(0.0)) == "white"      # dark green: the fastest


def test_a_report_of_one_parameter_set_never_labels_its_group_dash(run):
    from memsleuth.report import html
    fig = compare.throughput_figure(analyse_run(run).groups[:1], [])
    assert fig.groups == ["all cells"]
    assert "for the one parameter set" in html.draw(fig, 0).caption


def test_a_flat_memory_timeline_is_not_drawn():
    from memsleuth.report.content import TimelineFigure
    from memsleuth.report.sections import flat_timeline
    flat = TimelineFigure("c", [([0.0, 1.0, 2.0], [100.0, 101.0, 102.0])], 0)
    moving = TimelineFigure("c", [([0.0, 1.0, 2.0], [10.0, 60.0, 100.0])], 0)
    assert flat_timeline(flat) and not flat_timeline(moving)
