"""`memsleuth gate` on real processes (the spin preload, a real workload) and `diff`'s count
checks on two real runs. Every effect here is large or deterministic (a 3x slowdown, exactly twice
the madvise calls), so the tests hold on a busy machine; the gate's power on small changes is
bench/gate_power.py's to measure."""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

from conftest import fixture, memsleuth, needs_tracepoints

PARAMS = ["--workload", "random-mixed", "--param", "ws=400", "--param", "iterations=200000"]


def _spin() -> str:
    return f"spin={fixture('libfx-spin.so')}"


def _gate(tmp_path, *extra: str):
    js = tmp_path / "g.json"
    proc = memsleuth("gate", *PARAMS, "--baseline-alloc", _spin(), "--candidate-alloc", _spin(),
                     "--db", str(tmp_path / "g.db"), "--json", str(js), *extra)
    return proc, (json.loads(js.read_text()) if js.exists() else None)


@needs_tracepoints
def test_a_count_regression_fails_the_gate_whatever_the_time(tmp_path):
    xml = tmp_path / "g.xml"
    proc, doc = _gate(tmp_path, "--baseline-env", "MEMSLEUTH_FIXTURE_MADVISE=400",
                      "--candidate-env", "MEMSLEUTH_FIXTURE_MADVISE=200", "--junit", str(xml), "--md",
                      str(tmp_path / "g.md"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    madvise = next(c for c in doc["checks"] if c["metric"] == "madvise calls")
    # One madvise every 200 frees against every 400 (the frees of start-up and exit count too).
    assert madvise["verdict"] == "regression" and 1.95 < madvise["candidate"] / madvise["baseline"] < 2.05
    # the count's regression is named first-line, whether or not the time's (twice the calls can cost ~10%) resolved
    first = proc.stdout.splitlines()[1]
    assert first.startswith("REGRESSION: ") and "madvise calls +10" in first, first
    cases = {c.get("name"): c for c in ET.parse(xml).getroot().iter("testcase")}
    assert cases["madvise calls"].find("failure") is not None
    assert "Gate: FAIL" in (tmp_path / "g.md").read_text()


def test_a_large_slowdown_is_caught_in_time_paired_by_round(tmp_path):
    proc, doc = _gate(tmp_path, "--baseline-env", "MEMSLEUTH_FIXTURE_SPIN=0",
                      "--candidate-env", "MEMSLEUTH_FIXTURE_SPIN=300")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    time = doc["checks"][0]
    assert time["metric"] == "time (cpu)" and time["verdict"] == "regression" and time["change"]["low"] > 1.05
    assert doc["rounds"] >= 6 and doc["rounds"] < 30     # resolved early: the session stopped adding rounds


def test_a_time_change_the_rounds_cannot_resolve_exits_5_and_says_unresolved(tmp_path):
    # An A/A pair against a 0.01% threshold: 8 paired rounds cannot put a CI wholly on one side of
    # it (the chance that all 8 ratios fall below it is 1 in 256), so the gate must say unresolved.
    proc, doc = _gate(tmp_path, "--baseline-env", "MEMSLEUTH_FIXTURE_SPIN=0", "--candidate-env",
                      "MEMSLEUTH_FIXTURE_SPIN=0", "--threshold", "0.01%", "--min-rounds", "8", "--max-rounds", "8")
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert doc["verdict"] == "unresolved" and doc["checks"][0]["verdict"] == "unresolved"
    assert "Gate: UNRESOLVED (exit 5)" in proc.stdout and "unresolved:" in proc.stdout
    assert "same setup" in proc.stderr


def test_two_commands_from_strings(tmp_path):
    proc = memsleuth("gate", "--baseline-cmd", "true", "--candidate-cmd", "sh -c 'exit 0'", "--min-rounds", "6",
                     "--max-rounds", "6", "--db", str(tmp_path / "g.db"))
    assert proc.returncode in (0, 1, 5), proc.stderr
    assert "baseline:  glibc: true" in proc.stdout and "candidate: glibc: sh -c 'exit 0'" in proc.stdout


def test_gate_refuses_what_it_cannot_run(tmp_path):
    db = ["--db", str(tmp_path / "g.db")]
    for argv, words in ((["gate", *db], "no command for the baseline"),
                        (["gate", "--workload", "random-mixed", *db, "--", "true"], "not both"),
                        (["gate", "--param", "ws=4", *db, "--", "true"], "--workload"),
                        (["gate", "--baseline-cmd", "'unterminated", "--candidate-cmd", "true", *db], "--baseline-cmd"),
                        (["gate", "--threshold", "0%", *db, "--", "true"], "between 0% and 100%"),
                        (["gate", "--min-rounds", "9", "--max-rounds", "7", *db, "--", "true"], "--max-rounds")):
        proc = memsleuth(*argv)
        assert proc.returncode == 2 and words in proc.stderr, (argv, proc.stderr)


@needs_tracepoints
def test_diff_of_two_separate_runs_catches_a_count_regression(tmp_path):
    db = str(tmp_path / "d.db")
    # the timed rounds count no syscall: five warm-ups a side count them, each a run of its own
    for every in ("400", "200"):
        proc = memsleuth("compare", *PARAMS, "--alloc", _spin(), "--reps", "5", "--warmup", "5", "--no-reference",
                         "--db", db, "--env", f"MEMSLEUTH_FIXTURE_MADVISE={every}")
        assert proc.returncode == 0, proc.stderr
    xml = tmp_path / "d.xml"
    proc = memsleuth("diff", "1", "2", "--db", db, "--junit", str(xml))
    assert proc.returncode == 1, proc.stdout
    assert "madvise calls" in proc.stdout and "REGRESSION" in proc.stdout
    failed = [c.get("name") for c in ET.parse(xml).getroot().iter("testcase") if c.find("failure") is not None]
    assert "madvise calls" in failed       # (time may fail too: twice the calls cost time in a short run)
    # one warm-up a side (the default) is one count a side: the change is shown, never called
    for every in ("400", "200"):
        assert memsleuth("compare", *PARAMS, "--alloc", _spin(), "--reps", "5", "--no-reference", "--db", db,
                         "--env", f"MEMSLEUTH_FIXTURE_MADVISE={every}").returncode == 0
    proc = memsleuth("diff", "3", "4", "--db", db)
    line = next(x for x in proc.stdout.splitlines() if "madvise calls" in x)
    assert "REGRESSION" not in line and "warm-ups that counted the calls" in proc.stdout, proc.stdout


def test_show_of_a_gate_session_prints_the_gate_again(tmp_path):
    proc, doc = _gate(tmp_path, "--baseline-env", "MEMSLEUTH_FIXTURE_SPIN=0",
                      "--candidate-env", "MEMSLEUTH_FIXTURE_SPIN=300")
    shown = memsleuth("show", str(doc["run"]), "--db", str(tmp_path / "g.db"))
    assert shown.returncode == 0 and shown.stdout.startswith("memsleuth gate — spin+baseline vs spin+candidate")
    assert shown.stdout.splitlines()[1] == proc.stdout.splitlines()[1]     # the same verdict line


def test_history_trend_finds_the_run_where_time_stepped(tmp_path):
    db = str(tmp_path / "t.db")
    for spin in ("0", "0", "0", "0", "1000", "1000", "1000"):
        # runs long enough (and 5 of them) that a busy machine's hiccups stay small against the step; a
        # step of over 10x: beside two busy loops and the suite's other worker, a run before it read up to
        # 2.3x another (59 against 137 ns an op), and a 300-spin step of 4-5x there was once not found at run 5
        proc = memsleuth("compare", *PARAMS[:-1], "iterations=600000", "--alloc", _spin(), "--reps", "5",
                         "--no-reference", "--db", db, "--env", f"MEMSLEUTH_FIXTURE_SPIN={spin}")
        assert proc.returncode == 0, proc.stderr
    html = tmp_path / "t.html"
    proc = memsleuth("history", "--trend", "--db", db, "--html", str(html))
    assert proc.returncode == 0, proc.stderr
    # (Other steps may be real too: on a fresh machine the first runs can be slower.)
    step = next((line for line in proc.stdout.splitlines() if re.search(r"│ time\s+│\s+5 │", line)), None)
    assert step is not None, proc.stdout
    assert int(re.search(r"\+(\d+)\.\d%", step).group(1)) > 100     # 1000 spins per malloc: many times slower
    assert "the latest at run 5" in proc.stdout
    assert html.read_text().count("<svg") >= 1
    assert memsleuth("history", "--html", str(tmp_path / "x.html"), "--db", db).returncode == 2   # --html needs --trend
    # the list has Markdown and JSON forms of its own
    proc = memsleuth("history", "--md", str(tmp_path / "x.md"), "--json", str(tmp_path / "x.json"), "--db", db)
    assert proc.returncode == 0, proc.stderr
    listed = json.loads((tmp_path / "x.json").read_text())
    assert listed["schema"] == "memsleuth.history/1" and [r["id"] for r in listed["runs"]] == list(range(1, 8))
    assert "| 7 |" in (tmp_path / "x.md").read_text()
