"""Hostile input by class (issue 19), without processes: terminal control sequences, Markdown and
CSV escaping, passwords in every URL form, bytes that are not UTF-8, malformed probe lines and
figures, repeated parameter values, output paths that are not report files, absurd run ids."""
from __future__ import annotations

import io
import os
import sqlite3

import pytest
from rich.console import Console

from memsleuth.commands import options
from memsleuth.errors import UsageError
from memsleuth.records.evidence import Sample
from memsleuth.report.output import unsafe_destination
from memsleuth.measure.plan import MetricSpec, parse_command_params
from memsleuth.report import markdown, terminal
from memsleuth.report.csv_export import cell_text
from memsleuth.report.content import Report, Table
from memsleuth.session import redacted
from memsleuth.textsafe import clean_bytes
from memsleuth.records.store_pg import display
from memsleuth.textsafe import visible

HOSTILE = [
    "\x1b[2J\x1b[H",                                   # clear the screen
    "\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\",   # OSC 8 hyperlink
    "bell\x07 and backspace\x08",
    "c1 \x9b31m csi",
    "bidi \u202eexe.txt",
    "bytes \udcff\udcfe",                               # argv bytes that were not UTF-8 (surrogateescape)
    "[bold red]markup[/] [link=http://x]y[/link]",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_terminal_text_never_carries_a_control_character(text):
    shown = visible(text)
    assert not any(ord(c) < 0x20 and c not in "\t\n" or 0x7f <= ord(c) <= 0x9f for c in shown)
    assert not any(0xD800 <= ord(c) <= 0xDFFF or 0x202A <= ord(c) <= 0x202E for c in shown)


def test_a_report_full_of_hostile_text_prints_no_escape_sequence():
    t = Table("t " + HOSTILE[0], ["col" + HOSTILE[1]], [[h] for h in HOSTILE], notes=[HOSTILE[2]])
    report = Report("title " + HOSTILE[0], ["header " + h for h in HOSTILE], [t], footer=[HOSTILE[3]],
                    statements=[HOSTILE[4]], quiet=HOSTILE[5])
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=False, color_system=None)
    terminal.render(report, console)
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
    assert "\\x1b[2J" in text and "[bold red]markup[/]" in text   # shown, as data


def test_markdown_escapes_once_and_keeps_quotes():
    assert markdown.escape("it's") == "it's"
    assert "&lt;script&gt;" in markdown.escape("<script>alert(1)</script>")
    assert "\\[x\\]\\(javascript:1\\)" in markdown.escape("[x](javascript:1)")


@pytest.mark.parametrize("field,expected", [("=cmd|' /C calc'!A0", "'=cmd|' /C calc'!A0"), ("+1", "'+1"),
                                            ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"), ("\tx", "'\tx"),
                                            ("glibc", "glibc"), (42, 42), ("a\udcffb", "a\\xffb")])
def test_csv_fields_cannot_become_formulas(field, expected):
    assert cell_text(field) == expected


@pytest.mark.parametrize("url", ["postgresql://u:PW@host/db", "--db=postgresql://u:PW@host/db",
                                 "postgresql://u@host/db?password=PW&sslmode=require",
                                 "postgres://host/db?sslmode=require&PassWord=PW", "postgresql://u:PW@[::1:5432/db",
                                 "postgresql://u:PW@h/db?sslpassword=PW"])
def test_passwords_are_redacted_in_every_url_form(url):
    assert "PW" not in display(url)
    assert all("PW" not in a for a in redacted(["memsleuth", url]))


def test_argv_bytes_that_are_not_utf8_are_kept_and_shown_losslessly():
    (kept,) = redacted(["x\udcff\udcfe"])
    assert kept == "x\udcff\udcfe"                            # the store's JSON keeps them as they came
    shown = clean_bytes(kept)
    assert shown.encode("utf-8") and shown == "x\\xff\\xfe"    # every file shows the bytes


@pytest.mark.parametrize("line", [{"wall_ns": "abc"}, {"wall_ns": None}, {"wall_ns": 1e400}, {"syscalls": [1, 2]},
                                  {"counters": "x"}, {"syscalls": {"brk": "many"}}, {"ops": float("nan")},
                                  {"rss_start_kb": "big"}])
def test_a_malformed_region_line_is_skipped_not_fatal(line):
    good = {"type": "region", "name": "ok", "wall_ns": 5, "ops": 1}
    s = Sample.from_msrun({"status": "ok", "probe": [{"type": "region", "name": "bad", **line}, good]})
    assert [r.name for r in s.regions] == ["ok"]


@pytest.mark.parametrize("metric", ["fast", None, float("inf"), [1], True])
def test_a_result_figure_that_is_not_a_finite_number_is_dropped(metric):
    s = Sample.from_msrun({"status": "ok"}, {"metric": metric, "ops": 3})
    assert "metric" not in s.result and s.result["ops"] == 3


def test_metric_regex_reads_only_finite_numbers():
    m = MetricSpec.parse("x=value: ([0-9e.]+)")
    assert m.read("value: 1e999\nvalue: 2.5\n") == 2.5
    assert m.read("value: 1e999\n") is None


def test_the_same_parameter_value_twice_is_refused():
    with pytest.raises(UsageError, match="same value"):
        parse_command_params(["./b", "{ws}"], ["ws=400,400"])


def test_output_paths_that_are_not_report_files_are_refused(tmp_path):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    assert "not a regular file" in unsafe_destination(str(fifo))
    db = tmp_path / "m.db"
    sqlite3.connect(db).execute("create table t(x)").connection.commit()
    assert "SQLite database" in unsafe_destination(str(db))
    with pytest.raises(UsageError):
        options.writable_output(str(db), "--md")
    assert unsafe_destination(str(tmp_path / "new.md")) is None
    (tmp_path / "old.md").write_text("x")
    assert unsafe_destination(str(tmp_path / "old.md")) is None


@pytest.mark.parametrize("text", ["100000000000000000000000", "9223372036854775808", "0", "-1", "1e3", "abc"])
def test_absurd_run_ids_are_one_line_errors(text):
    with pytest.raises(UsageError):
        options.run_id(text)


def test_refusing_another_programs_sqlite_file_leaves_it_byte_for_byte(tmp_path):
    from memsleuth.records.store import Store
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("create table customers(id integer, name text)")
    con.execute("insert into customers values (1, 'x')")
    con.commit()
    con.close()
    before = other.read_bytes()
    with pytest.raises(UsageError, match="another program"):
        Store(str(other))
    assert other.read_bytes() == before
    assert not (tmp_path / "other.db-wal").exists()


def _store_with_a_damaged_run(tmp_path, column: str, value: str):
    """A real store (a stored run copied from tests/data) with one stored value replaced."""
    import shutil
    from pathlib import Path
    db = tmp_path / "d.db"
    shutil.copy(Path(__file__).resolve().parents[1] / "data" / "compare-random-mixed.db", db)
    con = sqlite3.connect(db)
    table = "samples" if column == "evidence" else "runs"
    con.execute(f"UPDATE {table} SET {column} = ?", (value,))
    con.commit()
    con.close()
    return db


@pytest.mark.parametrize("column,value", [("evidence", "[]"), ("evidence", "not json"), ("machine", "42"),
                                          ("spec", "[1]"), ("argv", "{}")])
def test_damaged_stored_values_are_one_line_errors_and_never_merged(tmp_path, column, value):
    from memsleuth.errors import StoreError
    from memsleuth.records.store import Store
    db = _store_with_a_damaged_run(tmp_path, column, value)
    src = Store(str(db), readonly=True)
    if column in ("evidence", "machine", "spec", "argv"):
        with pytest.raises(StoreError, match="run 1 is damaged"):
            src.load_run(1)
    target = Store(str(tmp_path / "t.db"))
    with pytest.raises(UsageError, match="damaged"):
        target.import_run(src.run_rows(1))
    assert target.run_ids() == []


def test_a_schema_version_that_is_not_a_number_is_one_line(tmp_path):
    from memsleuth.errors import StoreError
    from memsleuth.records.store import Store
    db = tmp_path / "v.db"
    Store(str(db)).close()
    con = sqlite3.connect(db)
    con.execute("UPDATE meta SET value='abc' WHERE key='schema_version'")
    con.commit()
    con.close()
    with pytest.raises((StoreError, UsageError), match="not a number"):
        Store(str(db), readonly=True)


def test_a_run_whose_writer_is_gone_is_merged_as_interrupted_never_running(tmp_path):
    import shutil
    from datetime import datetime, timezone
    from pathlib import Path
    from memsleuth.records.store import Store
    db = tmp_path / "src.db"
    shutil.copy(Path(__file__).resolve().parents[1] / "data" / "compare-random-mixed.db", db)
    Store(str(db)).close()                                   # schema 3 -> 4: the liveness columns
    fresh = datetime.now(timezone.utc).isoformat(timespec="seconds")
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET status='running', owner_host='a-fleet-node', owner_pid=4242, heartbeat_at=?",
                (fresh,))
    con.commit()
    con.close()
    src = Store(str(db), readonly=True)
    target = Store(str(tmp_path / "t.db"))
    assert src.run_status(1) == "running (on a-fleet-node)"
    assert target.merge_from(src)[:3] == ([], 0, 1)          # still running elsewhere: left for later
    new, _, _, damaged = target.merge_from(src, writers_gone=True)   # its fleet task has ended
    assert len(new) == 1 and not damaged
    assert target.run_status(new[0]) == "interrupted"


def test_a_killed_writer_elsewhere_is_merged_as_interrupted_once_its_heartbeat_is_stale(tmp_path):
    """Liveness by a local pid cannot be judged on another host: there the heartbeat decides, so
    every host reaches `interrupted`, and merge imports the run with what it kept."""
    import shutil
    from datetime import datetime, timedelta, timezone
    from pathlib import Path
    from memsleuth.records.store import STALE_S, Store
    db = tmp_path / "src.db"
    shutil.copy(Path(__file__).resolve().parents[1] / "data" / "compare-random-mixed.db", db)
    Store(str(db)).close()
    old = (datetime.now(timezone.utc) - timedelta(seconds=STALE_S + 5)).isoformat(timespec="seconds")
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET status='running', owner_host='a-killed-host', owner_pid=4242, heartbeat_at=?, "
                "created_at=?", (old, old))
    con.execute("UPDATE samples SET created_at=?", (old,))
    con.commit()
    con.close()
    src = Store(str(db), readonly=True)
    assert src.run_status(1) == "interrupted" and src.list_runs()[0].status == "interrupted"
    target = Store(str(tmp_path / "t.db"))
    new, present, running, damaged = target.merge_from(src)
    assert len(new) == 1 and (present, running, damaged) == (0, 0, [])
    assert target.run_status(new[0]) == "interrupted"
    run = target.load_run(new[0])
    assert run.status == "interrupted" and sum(len(c.samples) for c in run.cells) > 0    # what it kept
    assert target.merge_from(src)[:3] == ([], 1, 0)          # merged once


def test_liveness_is_judged_from_facts_any_host_has():
    from datetime import datetime, timedelta, timezone
    from memsleuth.records.store import STALE_S, judge_status
    now = datetime(2026, 11, 25, 12, 0, tzinfo=timezone.utc)
    recent, stale = ((now - timedelta(seconds=s)).isoformat() for s in (STALE_S / 2, STALE_S + 1))

    def judge(process=None, host="h", system="boot ns", last_sign=recent, status="running", start="100"):
        return judge_status(status, host=host, pid=42, start=start, system=system, last_sign=last_sign,
                            here_host="h", here_system="boot ns", process=process, now=now)
    assert judge(("100", "S", 0)) == "running"                        # its writer lives here
    assert judge(None) == "interrupted"                               # gone, however recent its heartbeat
    assert judge(("100", "Z", 0)) == "interrupted"                    # exited, not yet reaped
    assert judge(("999", "S", 0)) == "interrupted"                    # the pid is another process's now
    assert judge(("100", "R", 0x4)) == "running (its memsleuth is gone; ending)"   # SIGKILLed, tearing down
    assert judge(("100", "S", 0), system=None) == "running"           # a run stored before systems were
    # the same host name on another boot or PID namespace, or another host: the heartbeat decides
    assert judge(("100", "S", 0), system="other-boot ns") == "running (on h)"
    assert judge(("100", "S", 0), system="other-boot ns", last_sign=stale) == "interrupted"
    assert judge(host="node7") == "running (on node7)"
    assert judge(host="node7", last_sign=stale) == "interrupted"
    assert judge(host="node7", last_sign=None) == "running (on node7)"   # nothing to judge by: say where
    assert judge(host="node7", last_sign=stale, status="complete") == "complete"


@pytest.mark.parametrize("text,expected", [("10", (10, "")), ("010", (8, "")), ("0x10", (16, "")), ("1_0", (1, "_0")),
                                           ("\u0661\u0660", (None, "\u0661\u0660")), ("08", (0, "8")),
                                           ("abc", (None, "abc")), ("0", (0, ""))])
def test_tunable_numbers_are_read_as_glibc_reads_them(text, expected):
    from memsleuth.measure.tunables import glibc_number
    assert glibc_number(text) == expected


def test_plot_labels_are_plain_text_never_tex():
    from memsleuth.report import html
    from memsleuth.report.content import RatioFigure, ThroughputFigure
    groups = ["x=$\\foo$", "x=b", "x=$$", "x=^{_}"]
    tf = ThroughputFigure("throughput (ops/s)", True, groups, {"a$\\b$": [(1.0, 0.9, 1.1)] * 4})
    rf = RatioFigure(groups, ["a$\\b$"], [[1.0, 1.2, None, 1.0]], [[True, True, False, True]])
    for i, fig in enumerate((tf, rf)):
        drawn = html.draw(fig, i)
        assert drawn is not None and "foo" in drawn.svg


@pytest.mark.parametrize("manifest", ["[]", "42", '{"job": 5}', '{"job": "12", "results": "/x"}',
                                      '{"job": "12", "results": "/x", "targets": [1], "argv": []}',
                                      '{"job": "12", "results": "/x", "targets": [{"kind": "partition", "value": "a"}], '
                                      '"argv": "compare"}'])
def test_a_fleet_manifest_of_the_wrong_shape_is_one_line(tmp_path, manifest):
    from memsleuth.measure import fleet
    (tmp_path / fleet.MANIFEST).write_text(manifest)
    with pytest.raises(UsageError, match="not a fleet manifest"):
        fleet.load(str(tmp_path))


def test_a_numeric_host_name_from_a_damaged_store_is_text(tmp_path):
    from memsleuth.records.store import Store
    db = _store_with_a_damaged_run(tmp_path, "machine", '{"hostname": 42, "cpu_model": 7}')
    st = Store(str(db), readonly=True)
    (summary,) = st.list_runs()
    assert summary.machine.name == "42"
    assert st.load_run(1).machine.name == "42"


def test_one_schema_serves_both_stores():
    from memsleuth.records import schema
    pg = schema.ddl("postgresql")
    assert "--" not in pg and "INTEGER PRIMARY KEY" not in pg
    assert pg.count("BIGSERIAL PRIMARY KEY") == 3 and pg.count("BIGINT NOT NULL REFERENCES") == 2
    # The same tables and columns, in the same order, in both.
    def columns(text):
        import re
        return re.findall(r"^\s+(\w+) ", re.sub(r"--[^\n]*", "", text), re.M)
    assert columns(pg) == columns(schema.ddl("sqlite"))


@pytest.mark.parametrize("text", ["abc", "-5", "0", "5ms", ""])
def test_a_bad_window_names_the_option_it_came_from(text):
    with pytest.raises(UsageError, match="^--try-budget "):
        options.duration(text, "--try-budget")
    with pytest.raises(UsageError, match="^--duration "):
        options.duration(text)
