"""Where numbers are computed and where they are worded: a stored run is analysed once per report,
the builders only word what analysis computed, and the cases decide mechanisms with the rules'
own thresholds. Stored data and synthetic records only; no process."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from memsleuth.analysis import summary as analysis
from memsleuth.cases import alloc_churn, first_touch
from memsleuth.records.evidence import Timeline, median_by_wall
from memsleuth.analysis import cost
from memsleuth.analysis.findings import heap_trim, zero_page
from memsleuth.report import builders, json_export, markdown, wording
from memsleuth.records.store import Store

DATA = Path(__file__).resolve().parents[1] / "data" / "compare-random-mixed.db"


@pytest.fixture()
def run(tmp_path):
    db = tmp_path / "r.db"
    shutil.copy(DATA, db)
    st = Store(str(db), readonly=True)
    yield st.load_run(1)
    st.close()


def test_a_report_and_its_json_come_from_one_analysis(run, monkeypatch):
    calls = []
    real = analysis.analyse_run

    def counting(r):
        calls.append(r.id)
        return real(r)
    monkeypatch.setattr(analysis, "analyse_run", counting)
    report = builders.for_run(run)
    markdown.render(report)
    doc = json.loads(json_export.render(report))
    assert calls == [run.id]
    assert report.analysis is not None
    assert doc["answer"] == report.answer
    in_json = [f["id"] for c in doc["cells"] for k in ("findings", "comparison_findings") for f in c["summary"][k]]
    assert sorted(in_json + [f["id"] for f in doc["findings"]]) == sorted(f.id for f in report.findings)


def test_the_evidence_table_marks_what_analysis_found_standing_out(run):
    report = builders.for_run(run)
    table = next(t for t in report.tables if t.title == "Evidence")
    cells = [c for g in report.analysis.groups for c in g.cells if c.estimate is not None]
    marked = {(r, table.columns[k]) for r, k in table.differs}
    assert marked == {(r, name) for r, c in enumerate(cells) for name in c.standout}


def test_standouts_need_the_factor_and_the_floor():
    def cell(minflt, brk):
        e = analysis.MedianEvidence(scope="process", minflt=minflt, syscalls={"brk": brk})
        return analysis.CellSummary(cell=None, metric="wall_s", estimate=None, failures=[], ok_samples=[], evidence=e)
    a, b, c = cell(1000, 3), cell(2000 + analysis.STANDOUT_MIN_EVENTS, 9), cell(1500, 1)
    analysis.standouts([a, b, c])
    assert b.standout == {"minor faults"}     # 2.1x and 1,100 more; brk 9 vs 1 is under the floor
    assert a.standout == set() and c.standout == set()


def test_timeline_slices_and_rates_read_the_running_totals():
    t = Timeline(("t_ms", "rss_kb", "page-faults-minor", "brk"),
                 tuple((ms, 1000, 10 * ms, 0) for ms in range(0, 1001, 10)))
    cuts = t.slices(10)
    assert len(cuts) == 10 and cuts[0][0] == 0 and cuts[-1][1] == 100
    assert all(b == c for (_, b), (c, _) in zip(cuts, cuts[1:]))
    assert t.rate("page-faults-minor", *cuts[3]) == pytest.approx(10_000)
    assert t.growing(("page-faults-minor", "brk", "munmap")) == ["page-faults-minor"]
    mids, per_s = t.rates("page-faults-minor")
    assert len(mids) == len(per_s) == 100 and set(round(v) for v in per_s) == {10_000}


def test_the_median_run_is_one_definition():
    class S:
        def __init__(self, wall_ns):
            self.wall_ns = wall_ns
    runs = [S(5), S(1), S(9), S(3)]
    assert median_by_wall(runs) == 3          # the lower median: 3 of (1, 3, 5, 9)
    assert median_by_wall([]) is None


def _churn(faults: float, shrink: float, shrinking: int, steps: int = 10) -> alloc_churn.CellEvidence:
    return alloc_churn.CellEvidence(cell=None, allocator="glibc", tunables="default", variant="free-all",
                                    step_bytes=8 << 20, nbuf=2, steps=steps,
                                    faults={"alloc": 0.0, "init": faults, "target": 0.0, "free": 0.0},
                                    wall_ns={}, calls={"brk": 2.0, "mmap": 0.0, "munmap": 0.0, "madvise": 0.0},
                                    free_brk_delta=-shrink, alloc_brk_delta=shrink, shrinking_steps=shrinking,
                                    status="ok")


def test_alloc_churn_names_re_faulting_and_trimming_by_the_heap_trim_rule():
    pages = (8 << 20) / 4096
    at = cost.REFAULT_SHARE * pages
    assert _churn(at, 0, 0).refaults and not _churn(at - 1, 0, 0).refaults
    trimmed = alloc_churn.mechanism(_churn(pages, heap_trim.MIN_SHRINK_PER_STEP, 9))
    assert "heap-top trimming" in trimmed
    assert "heap-top trimming" not in alloc_churn.mechanism(_churn(pages, heap_trim.MIN_SHRINK_PER_STEP - 1, 9))
    few = int(heap_trim.MIN_SHRINKING_SHARE * 9) - 1      # moved down in too few of the 9 steps after the first
    assert "heap-top trimming" not in alloc_churn.mechanism(_churn(pages, 8 << 20, few))


def test_first_touch_flags_the_zero_page_at_the_zero_page_rule_threshold():
    n = 1 << 30
    pages = n / 4096

    def setup(zero_pages: float) -> first_touch.SetupEvidence:
        # The copy faulted the destination (which stays resident) and the source's zero pages.
        return first_touch.SetupEvidence(cell=None, setup="fresh", allocator="glibc", n_bytes=n, supported=True,
                                         reason=None, copy_ns=1.0, copy_faults=pages + zero_pages, again_ns=None,
                                         again_faults=None, source_ns=None, setup_ns=None, setup_faults=None,
                                         rss_before_kb=0.0, rss_after_kb=n / 1024, status="ok")
    at = (1 - zero_page.MAX_RSS_PER_FAULT) * pages
    assert setup(at + 0.5).zero_page and not setup(at - 1).zero_page


CASE_DATA = Path(__file__).resolve().parents[1] / "data" / "case-thread-heap.db"


def test_case_tables_carry_numbers_that_only_the_report_formats(tmp_path):
    db = tmp_path / "c.db"
    shutil.copy(CASE_DATA, db)
    st = Store(str(db), readonly=True)
    run = st.load_run(1)
    st.close()
    report = builders.for_run(run)
    result = report.analysis.result
    (cells,) = result.tables
    doc = json.loads(json_export.render(report))
    (table,) = doc["case"]["tables"]
    time_col = table["columns"].index("time per call")
    for raw, shown, cooked in zip(table["rows"], report.tables[0].rows, cells.rows):
        assert isinstance(raw[time_col], dict) and raw[time_col]["unit"] == "ns"
        assert isinstance(raw[time_col]["value"], float)
        assert shown == [wording.case_cell_text(c) for c in cooked]
        assert shown[time_col] == f"{raw[time_col]['value']:,.0f} ns"
    assert time_col in report.tables[0].align_right
    # Arenas come from the heap accounting of each cell's explaining run, per process, in KiB.
    arenas = table["columns"].index("arenas per process (resident, main first)")
    rows = {(r[0], r[1], r[3]): r[arenas] for r in table["rows"]}
    threads, procs = rows[("glibc", "default", "threads")], rows[("glibc", "default", "processes")]
    assert len(threads) == 1 and len(threads[0]) >= 2 and all(a["unit"] == "KiB" and a["value"] > 0 for a in threads[0])
    assert [len(p) for p in procs] == [1, 1, 1]
    assert rows[("mimalloc", "default", "threads")] == "not read (malloc is not glibc's)"


def test_case_cells_in_words_and_in_json():
    from memsleuth.cases.base import Num, Ratio, Seq, cell_json, mib_of, percent_of
    from memsleuth.stats import Estimate
    assert wording.case_cell_text(mib_of(3 << 20, signed=True)) == "+3.0 MiB"
    assert wording.case_cell_text(percent_of(0.123)) == "12.3 %"
    assert wording.case_cell_text(Num(None, "ns")) == "n/a"
    assert wording.case_cell_text(Seq((Num(1), Num(2000)))) == "1 / 2,000"
    assert cell_json(Seq((Num(1), Num(2.5, "GB/s")))) == [1, {"value": 2.5, "unit": "GB/s"}]
    e = Estimate(1.5, 1.25, 1.75, 0.97, 6)
    assert wording.case_cell_text(Ratio(e)).startswith("1.50x [1.25, 1.75]")
    assert cell_json(Ratio(e)) == {"median": 1.5, "low": 1.25, "high": 1.75, "n": 6}
    assert cell_json(Ratio(None)) is None


def test_a_run_that_never_finished_says_what_its_figures_are_of():
    """A run killed by its timeout was counted until the kill: the first line says no run finished and
    that the figures are of the part it ran (a kernel-time finding followed 'nothing was measured'
    before); a run that measured no CPU time says nothing was measured."""
    from memsleuth.records.evidence import Sample
    killed = Sample.from_msrun({"status": "timeout", "detail": "killed after 1 s", "wall_ns": 1_004_152_235,
                                "user_ns": 50_000_000, "sys_ns": 950_000_000, "minflt": 276_784})
    line = wording.failures_answer([killed], [killed])[0]
    assert line.startswith("TIMEOUT: killed after 1 s: no run finished") and "1.00 s it ran" in line, line
    assert "nothing was measured" not in line
    # several killed runs: the figures are all of theirs (medians), not the first one's
    lines = wording.failures_answer([killed, killed, killed], [killed, killed, killed])
    assert "of what 3 runs counted until each ended" in lines[0], lines
    gone = Sample.from_msrun({"status": "error", "detail": "could not start", "wall_ns": 0, "user_ns": 0, "sys_ns": 0})
    assert "nothing was measured" in wording.failures_answer([gone], [gone])[0]


def test_a_comparison_with_too_few_rounds_for_a_ci_says_so_not_that_the_cis_overlap():
    """compare --reps 3 (plain-steps: glibc 1.54 s, mimalloc 0.23 s): no paired ratio has a CI, so none
    'includes no difference'; the first line says why nothing is resolved and gives the medians as such."""
    from types import SimpleNamespace
    from memsleuth.analysis.summary import Standings
    from memsleuth.stats import Estimate

    def cell(name, median):
        return SimpleNamespace(cell=SimpleNamespace(contender=name), metric="wall_s", failures=[],
                               estimate=Estimate(median, None, None, None, 3))
    s = Standings(unresolved=["the one parameter set"],
                  too_few={"the one parameter set": (3, [cell("mimalloc", 0.2311), cell("glibc", 1.539)])})
    line, = wording.compare_answer(s)
    assert "3 paired rounds give no 95% CI (6 rounds at least)" in line and "include no difference" not in line
    assert line.endswith("the medians, not a verdict: mimalloc 0.2311 s, glibc 1.539 s."), line
    # with CIs that overlap, the sentence says that
    line, = wording.compare_answer(Standings(unresolved=["size=64"]))
    assert "the paired ratios' CIs include no difference beyond the noise threshold" in line
