"""The answer first, the width, flame graphs and the pprof profile, on stored runs (issue 34): a
check of a program that leaks 1 KiB per request beside a 64 KiB buffer it frees
(tests/data/check-leak-request.db, `memsleuth check -- plain-leak_request 200000`), the stored
compare and case runs. No process."""
from __future__ import annotations

import gzip
import json
import re
import shutil
import xml.etree.ElementTree as ET
from io import StringIO
from pathlib import Path

import pytest
from rich.console import Console

from memsleuth import cli
from memsleuth.analysis import memory
from memsleuth.records.heap import Heap
from memsleuth.analysis import stacks
from memsleuth.report import builders, flame, html, json_export, markdown, pprof_export, speedscope_export, terminal
from memsleuth.report.content import TimelineFigure
from memsleuth.records.store import Store

DATA = Path(__file__).resolve().parents[1] / "data"


def load(tmp_path, name: str, run_id: int = 1):
    db = tmp_path / name
    shutil.copy(DATA / name, db)
    st = Store(str(db), readonly=True)
    run = st.load_run(run_id)
    st.close()
    return run


@pytest.fixture()
def leak(tmp_path):
    return load(tmp_path, "check-leak-request.db")


def text_at(report, width: int) -> list[str]:
    out = StringIO()
    terminal.render(report, Console(file=out, width=width, force_terminal=False, color_system=None))
    return out.getvalue().splitlines()


# ---- the answer first, at any width ----------------------------------------------------------------

def test_check_states_its_costliest_findings_and_their_change_first(leak):
    report = builders.for_run(leak)
    found = [f for f in report.findings if f.id not in ("counters-unavailable", "unstable-measurement")]
    assert report.answer[0] == found[0].title and report.answer[1] == f"  change: {found[0].advice}"
    lines = text_at(report, 80)
    first = " ".join(lines[:8])
    assert found[0].title.split(":")[0] in first and "change:" in first
    assert json.loads(json_export.render(report))["answer"] == report.answer
    leak_f = next(f for f in report.findings if f.id == "heap-leak")
    assert "leak_request.c:14" in leak_f.title and leak_f.title in report.answer


@pytest.mark.parametrize("name", ["check-leak-request.db", "compare-random-mixed.db", "case-thread-heap.db"])
def test_every_report_kind_fits_80_columns(tmp_path, name):
    report = builders.for_run(load(tmp_path, name))
    lines = text_at(report, 80)
    assert max(len(line) for line in lines) <= 80, [line for line in lines if len(line) > 80][:3]
    assert report.answer or report.statements, "the first lines must carry the answer"
    md = markdown.render(report).splitlines()
    assert md[2].startswith("**"), md[:4]          # the answer (or the case's question) right under the title


def test_diff_states_its_verdict_first_and_fits_80_columns(tmp_path):
    from memsleuth.analysis import regression
    from memsleuth.report.builders import diff
    a = load(tmp_path, "compare-random-mixed.db")
    changes = regression.compare_runs(a, a, 0.05, 0.10)
    report = diff.build(a, a, changes, regression.reference_change(a, a), 0.05)
    assert report.answer[0] == "No regression resolved beyond the thresholds."
    lines = text_at(report, 80)
    assert lines[1] == report.answer[0] and max(len(x) for x in lines) <= 80


def test_a_case_shows_what_its_evidence_shows_before_its_tables(tmp_path):
    report = builders.for_run(load(tmp_path, "case-thread-heap.db"))
    lines = text_at(report, 120)
    shows = lines.index("What the evidence shows")
    assert shows < 8 and all(t.title not in "\n".join(lines[:shows]) for t in report.tables)


def test_columns_is_honoured_when_piped_and_a_documented_width_without_it():
    assert cli.output_width(False, "80") == 80
    assert cli.output_width(True, "100") == 100
    assert cli.output_width(False, None) == cli.PIPED_WIDTH
    assert cli.output_width(False, "x") == cli.PIPED_WIDTH and cli.output_width(False, "5") == cli.PIPED_WIDTH
    assert cli.output_width(True, None) is None        # a terminal: rich asks it


# ---- stack sets -------------------------------------------------------------------------------------

def test_the_stored_check_has_every_stack_set_and_their_totals_are_the_runs(leak):
    cell = leak.cells[0]
    sets = {s.name: s for s in stacks.for_cell(cell)}
    assert {"page faults", "allocated bytes", "live at the peak", "live at exit", "CPU time"} <= set(sets)
    explain = cell.explain_samples[0]
    # samples x period estimates the faults the explaining run counted
    assert 0.7 <= sets["page faults"].total / explain.minflt <= 1.3, (sets["page faults"].total, explain.minflt)
    # the bytes live at exit, sampled by bytes, estimate the accounting's exact count
    assert 0.7 <= sets["live at exit"].total / explain.heap.live_bytes <= 1.3
    # the leak's stack is the program's frame over the allocator's: main at the leaking line
    top = max(sets["live at exit"].stacks, key=lambda x: x[1])[0]
    own = [f for f in top if f[3] == "program"]
    assert own and own[-1][0] == "main" and own[-1][1].endswith("leak_request.c") and own[-1][2] == 14, top
    root = stacks.merge(sets["live at exit"])
    assert root.value == pytest.approx(sets["live at exit"].total)
    assert sum(c.value for c in root.children.values()) == pytest.approx(root.value)


def test_a_flame_graph_is_well_formed_escaped_and_proportional():
    hostile = '<script>alert("x")</script> & [/]'
    s = stacks.StackSet("page faults", "faults", "count", [
        ((("main", "/src/a.c", 3, "program"), (hostile, "", 0, "runtime")), 300.0),
        ((("main", "/src/a.c", 3, "program"), ("memset", "", 0, "runtime"), ("clear_page", "", 0, "kernel")), 100.0)])
    svg = flame.svg(stacks.merge(s), "page faults", "count")
    tree = ET.fromstring(svg)           # well-formed XML: every name escaped
    assert "<script" not in svg and "&lt;script&gt;" in svg
    ns = "{http://www.w3.org/2000/svg}"
    boxes = {g.find(f"{ns}title").text.split(":")[0]: float(g.find(f"{ns}rect").get("width"))
             for g in tree.iter(f"{ns}g")}
    assert boxes["main"] == pytest.approx(boxes["all"], abs=1)
    assert boxes[hostile] / boxes["memset"] == pytest.approx(3.0, rel=0.02)
    fills = {g.find(f"{ns}title").text.split(":")[0]: g.find(f"{ns}rect").get("fill") for g in tree.iter(f"{ns}g")}
    assert fills["main"] in flame.COLOURS["program"] and fills["clear_page"] in flame.COLOURS["kernel"]
    assert fills["memset"] in flame.COLOURS["runtime"]


def test_a_flame_graph_of_names_with_control_characters_is_still_xml():
    s = stacks.StackSet("cpu", "cpu", "count", [((("evil\x1b[2J\u202eemag", "", 0, "program"),
                                                  ("nul\x00\x07", "", 0, "runtime")), 10.0)])
    svg = flame.svg(stacks.merge(s), "cpu", "count")
    ET.fromstring(svg)
    assert "\x1b" not in svg and "\u202e" not in svg and "\\x1b" in svg


# ---- pprof ------------------------------------------------------------------------------------------

def test_the_pprof_profile_reads_back_with_one_sample_type_per_stack_set(leak):
    data = pprof_export.render(leak)
    profile = pprof_export._classes()["Profile"]()
    profile.ParseFromString(gzip.decompress(data))
    st = list(profile.string_table)
    assert st[0] == ""
    types = [st[t.type] for t in profile.sample_type]
    sets = stacks.for_cell(leak.cells[0])
    assert types == [s.type for s in sets]
    for k, s in enumerate(sets):
        assert sum(x.value[k] for x in profile.sample) == pytest.approx(s.total, rel=1e-3, abs=len(s.stacks))
    names = {(st[f.name], st[f.filename]) for f in profile.function}
    assert any(n == "main" and f.endswith("leak_request.c") for n, f in names)
    lines = {ln.line for loc in profile.location for ln in loc.line}
    assert 14 in lines


def test_every_heap_sample_type_is_advertised_even_when_no_sampled_block_was_live():
    """Nothing sampled was still live at exit (a program that freed all it sampled): the profile still
    holds inuse_space_exit, empty, beside the others."""
    from types import SimpleNamespace
    frames = [["main", "leak.c", 21, "program"]]
    h = SimpleNamespace(stacks=[[frames, 4096.0, 4096.0, 0.0]])
    sets = stacks.from_heap(h)
    assert [s.type for s in sets] == ["alloc_space", "inuse_space_peak", "inuse_space_exit"]
    assert sets[2].stacks == [] and sets[0].total == 4096.0
    assert stacks.from_heap(SimpleNamespace(stacks=[])) == []


def test_a_run_without_stacks_says_so_for_pprof(tmp_path):
    from memsleuth.errors import UsageError
    with pytest.raises(UsageError, match="no sampled stacks"):
        pprof_export.render(load(tmp_path, "compare-random-mixed.db"))


# ---- speedscope -------------------------------------------------------------------------------------

def test_speedscope_gets_one_profile_per_stack_set_with_the_programs_frames(leak):
    """speedscope shows one sample type of a pprof profile: its own format lists every stack set as a
    profile, each sample a stack of shared frames from the outermost in, weighed in the set's unit."""
    doc = json.loads(speedscope_export.render(leak))
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    sets = [s for s in stacks.for_cell(leak.cells[0]) if s.stacks]
    frames = doc["shared"]["frames"]
    assert [p["name"] for p in doc["profiles"]] == [s.name for s in sets]
    for prof, s in zip(doc["profiles"], sets):
        assert prof["type"] == "sampled" and prof["unit"] in ("bytes", "nanoseconds", "none")
        assert len(prof["samples"]) == len(prof["weights"]) == len(s.stacks)
        assert prof["endValue"] == pytest.approx(s.total) and prof["startValue"] == 0
        assert all(0 <= i < len(frames) for stack in prof["samples"] for i in stack)
        # outermost first: the first frame of each stack is its root as stacks.py stores it
        assert [frames[stack[0]]["name"] for stack in prof["samples"]] == [st[0][0] for st, _ in s.stacks]
    heap = next(p for p in doc["profiles"] if p["name"] == "live at exit")
    assert heap["unit"] == "bytes"
    assert all(any(frames[i]["name"] == "main" for i in stack) for stack in heap["samples"])
    assert any(f["name"] == "main" and f.get("file", "").endswith("leak_request.c") and f.get("line") == 14
               for f in frames)


def test_a_run_without_stacks_says_so_for_speedscope(tmp_path):
    from memsleuth.errors import UsageError
    with pytest.raises(UsageError, match="no sampled stacks"):
        speedscope_export.render(load(tmp_path, "compare-random-mixed.db"))


# ---- the HTML -------------------------------------------------------------------------------------

def test_the_check_html_opens_with_the_answer_and_shows_flame_graphs_without_mathtext(leak):
    report = builders.for_run(leak)
    text = html.render(report)
    body = text[text.index("<body>"):]
    assert body.index('class="answer"') < body.index("<h2>")
    assert text.count('class="figure flame"') == len(stacks.for_cell(leak.cells[0]))
    assert "mathdefault" not in text and not re.search(r"<text[^>]*>[^<]*\$", text)
    assert not re.search(r"(?<![\w.])-\d[\d.,]* (B|KiB|MiB|GiB)\b", re.sub(r"<[^>]+>", " ", text)), "a negative size"


def test_log_axes_are_labelled_in_plain_numbers():
    t = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5]
    fig = TimelineFigure("x", [(t, [1, 2, 3, 4, 5, 6])], 0, {"page faults": (t, [1, 10, 100, 1e3, 1e4, 1e5])})
    svg = html.draw(fig, 0).svg
    assert "mathdefault" not in svg and "$" not in svg
    assert ">100k<" in svg or ">10k<" in svg


def test_live_blocks_not_resident_are_said_never_a_negative_size():
    h = {"live_bytes": 8 << 20, "peak_live_bytes": 50 << 20,
         "at_peak": {"rss_kb": 20 << 10, "anon_kb": 10 << 10, "live_bytes": 50 << 20, "peak_live_bytes": 50 << 20},
         "at_exit": {"rss_kb": 20 << 10, "anon_kb": 18 << 10, "live_bytes": 8 << 20}}
    rows = {what.split(" (")[0]: (p, e) for what, p, e in memory.composition(Heap.from_dict(h))}
    assert rows["anonymous beyond the live heap"] == (None, 10 << 20)
    assert rows["live heap not resident"] == (40 << 20, None)
    assert all(v is None or v >= 0 for p, e in rows.values() for v in (p, e))


# ---- check --pid, from a stored window (tests/data/check-attach.db: fx-service attached for 2 s) ----

def test_an_attached_window_is_reported_as_a_window(tmp_path):
    run = load(tmp_path, "check-attach.db")
    report = builders.for_run(run)
    assert report.answer[0].startswith("Heap top given back") and "handle (service.c:" in " ".join(
        next(f for f in report.findings if f.id == "heap-trim-churn").call_sites)
    text = "\n".join(report.header)
    assert "attached to process" in text and "threads: 1 at the start" in text
    assert "not measured when attaching: the live heap" in text and "memsleuth check -- CMD" in text
    smaps = next(t for t in report.tables if t.title.startswith("Memory: what the resident memory is made of now"))
    assert {row[1] for row in smaps.rows} >= {"heap (brk)", "anonymous", "stacks", "file-backed", "shared memory"}
    cpu = next(t for t in report.tables if t.title == "CPU time by kernel path (sampled)")
    assert "attached window" in cpu.notes[0] and "explaining run" not in cpu.notes[0]
    assert not any("--try" in line for line in report.footer)   # the advice is not tried on a running service
    assert max(len(x) for x in text_at(report, 80)) <= 80


def test_a_failed_explaining_run_is_said_as_such_never_as_the_programs_failure(leak):
    """`check -- valgrind --error-exitcode=9 ...`: memcheck failed the explaining run (the heap
    accounting read a block's header), the measured run was fine. The report read "ERROR: exited
    with status 9: no run finished" and listed it under Failures; it says the explaining run failed,
    and what is missing where no explaining run succeeded."""
    from memsleuth.records.evidence import Sample
    from memsleuth.records.stored import EXPLAIN_ROUND
    cell = leak.cells[0]
    failed = Sample.from_msrun({"status": "error", "detail": "exited with status 9",
                                "stderr_tail": "==12954== Invalid read of size 8\n==12954==    at 0x485446D: heap_init"})
    for keep_ok in (True, False):
        cell.samples = [(r, w, s) for r, w, s in cell.samples if r != EXPLAIN_ROUND or (keep_ok and s.ok)]
        cell.samples.append((EXPLAIN_ROUND, True, failed))
        report = builders.for_run(leak)
        text = " ".join(text_at(report, 200))
        assert "no run finished" not in text and not any(t.title == "Failures" for t in report.tables)
        (line,) = [h for h in report.header if h.startswith("explaining run: ")]
        assert "exited with status 9" in line and "heap_init" in line
        assert ("is missing from this report" in line) == (not keep_ok), line
