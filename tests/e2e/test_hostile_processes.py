"""Hostile programs, paths and signals against real processes (issue 19): a program's stderr full of
terminal escapes, a report path naming the store, SIGTERM to memsleuth mid-run, a program that
signals its parent, a malformed probe line, a regular expression that backtracks."""
from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from conftest import default_stop_signals, memsleuth


def test_a_programs_escape_sequences_reach_no_terminal(tmp_path):
    db = str(tmp_path / "h.db")
    evil = r'printf "\033[2J\033]8;;http://evil.example/\033\\link\033]8;;\033\\ \007bell" >&2; exit 3'
    proc = memsleuth("check", "--db", db, "--reps", "1", "--no-where", "--", "sh", "-c", evil)
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout
    assert "\\x1b[2J" in proc.stdout          # shown, as data
    shown = memsleuth("show", "--db", db)
    assert "\x1b" not in shown.stdout and "\\x1b[2J" in shown.stdout
    hist = memsleuth("history", "--db", db)
    assert "\x1b" not in hist.stdout


def test_a_report_path_naming_the_store_is_refused_and_the_store_kept(tmp_path):
    db = tmp_path / "s.db"
    assert memsleuth("check", "--db", str(db), "--reps", "1", "--no-where", "--", "true").returncode == 0
    before = db.read_bytes()
    for flag in ("--md", "--html", "--json"):
        proc = memsleuth("show", "--db", str(db), flag, str(db))
        assert proc.returncode in (2, 4) and "SQLite database" in proc.stderr and "Traceback" not in proc.stderr
    proc = memsleuth("export", "1", "--db", str(db), "--format", "csv", "--output", str(db))
    assert proc.returncode in (2, 4) and "Traceback" not in proc.stderr
    assert sqlite3.connect(db).execute("select count(*) from runs").fetchone()[0] == 1
    assert db.read_bytes()[:16] == before[:16]


def test_a_fifo_as_the_store_is_refused_at_once(tmp_path):
    fifo = tmp_path / "f.db"
    os.mkfifo(fifo)
    proc = memsleuth("history", "--db", str(fifo), timeout=30)
    assert proc.returncode == 2 and "not a regular file" in proc.stderr


def _alive(marker: str) -> list[str]:
    out = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    return [p for p in out if p != str(os.getpid())]



@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_ends_the_measured_tree_and_keeps_what_finished(tmp_path, sig, code):
    """SIGTERM, and SIGHUP (a closed terminal or ssh session), end the run as Ctrl-C does: the measured
    tree ended, what finished kept, said on stderr, and the exit code 128 + the signal (docs/usage.md)."""
    db = tmp_path / "t.db"
    marker = f"memsleuth-sig{int(sig)}-{os.getpid()}"
    p = subprocess.Popen([sys.executable, "-m", "memsleuth", "check", "--db", str(db), "--reps", "3", "--no-where",
                          "--", "sh", "-c", f"sleep 30; : {marker}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, preexec_fn=default_stop_signals)
    # The measured shell itself (memsleuth's own command line holds the same words).
    measured = f"^sh -c sleep 30; : {marker}"
    deadline = time.monotonic() + 60
    while not _alive(measured) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _alive(measured), "the measured program never started"
    time.sleep(0.5)
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode == code and "Traceback" not in err, (p.returncode, err)
    assert "Terminated" in out or "terminated" in err, (out, err)
    time.sleep(0.5)
    assert not _alive(measured), "the measured program outlived memsleuth"
    status = sqlite3.connect(db).execute("select status from runs").fetchone()[0]
    assert status in ("interrupted", "failed"), status


def test_a_program_that_signals_its_parent_is_measured_not_obeyed(tmp_path):
    js = tmp_path / "k.json"
    proc = memsleuth("check", "--db", str(tmp_path / "k.db"), "--reps", "2", "--no-where", "--json", str(js), "--",
                     "sh", "-c", "kill -TERM $PPID; kill -INT $PPID; sleep 0.2")
    assert proc.returncode == 0, proc.stderr
    samples = json.loads(js.read_text())["cells"][0]["samples"]
    assert [s["status"] for s in samples if not s["warmup"]] == ["ok", "ok"]


def test_a_malformed_probe_line_and_a_bad_figure_do_not_end_the_comparison(tmp_path):
    script = ("import os; fd = int(os.environ['MEMSLEUTH_FD']); "
              "os.write(fd, b'{\"type\":\"region\",\"name\":\"x\",\"wall_ns\":\"abc\"}\\n'); "
              "os.write(fd, b'{\"type\":\"region\",\"name\":\"y\",\"wall_ns\":1e400}\\n'); "
              "os.write(fd, b'{\"type\":\"result\",\"result\":{\"metric\":\"fast\"}}\\n'); print('t: 5')")
    proc = memsleuth("compare", "--db", str(tmp_path / "p.db"), "--alloc", "glibc", "--reps", "2", "--no-reference",
                     "--", sys.executable, "-c", script)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


def test_a_backtracking_metric_regex_ends_in_a_recorded_error_not_a_hang(tmp_path):
    proc = memsleuth("compare", "--db", str(tmp_path / "r.db"), "--alloc", "glibc", "--reps", "1", "--no-reference",
                     "--metric", "m=(x+x+)+y([0-9]):higher", "--", "sh", "-c", "printf 'x%.0s' $(seq 1 5000)",
                     timeout=120)
    assert "Traceback" not in proc.stderr
    assert proc.returncode in (0, 3)


def test_the_fleet_script_quotes_every_path_and_runs_nothing_from_it(tmp_path):
    from memsleuth.measure.fleet import Target, script
    marker = tmp_path / "INJECTED"
    results = tmp_path / "a b 'q' \"d\" fl$(touch INJECTED) `touch INJECTED` ${HOME}"
    results.mkdir()
    text = script([Target("partition", "p1")], None, ["true"], ["prog", "$(touch x)"], results, None, [])
    env = {**os.environ, "SLURM_ARRAY_TASK_ID": "0", "SLURM_JOB_ID": "7"}
    proc = subprocess.run(["bash", "-c", text], env=env, capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert not marker.exists() and not (tmp_path / "x").exists()
    assert (results / "task-0.started").read_text().startswith("7 ")
    assert (results / "task-0.exit").read_text().strip() == "0"


@pytest.mark.parametrize("value", ["glibc.malloc.arena_max=1_0", "glibc.malloc.arena_max=\u0661"])
def test_tunable_values_glibc_would_misread_are_refused(value):
    from memsleuth.measure import tunables
    from memsleuth.errors import UsageError
    if tunables.known() is None:
        pytest.skip("this loader cannot list its tunables")
    with pytest.raises(UsageError):
        tunables.validate(value)
    tunables.validate("glibc.malloc.arena_max=010")   # octal 8, as glibc reads it: accepted


def test_argv_bytes_that_are_not_utf8_still_give_every_report(tmp_path):
    md, html_, js = tmp_path / "r.md", tmp_path / "r.html", tmp_path / "r.json"
    argv = [sys.executable.encode(), b"-m", b"memsleuth", b"check", b"--db", str(tmp_path / "b.db").encode(),
            b"--reps", b"1", b"--no-where", b"--md", str(md).encode(), b"--html", str(html_).encode(), b"--json",
            str(js).encode(), b"--", b"sh", b"-c", b"true", b"x\xff\xfe"]
    proc = subprocess.run(argv, capture_output=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert b"Traceback" not in proc.stderr
    for f in (md, html_, js):
        assert f.exists() and f.stat().st_size > 0
    assert "x\\xff\\xfe" in md.read_text(encoding="utf-8")       # the bytes, shown losslessly
    json.loads(js.read_text(encoding="utf-8"))


def test_a_machine_label_from_the_environment_is_held_to_the_same_rule(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "memsleuth", "check", "--db", str(tmp_path / "l.db"), "--reps", "1",
                           "--no-where", "--", "true"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "MEMSLEUTH_MACHINE_LABEL": "\x1b[2Jbox"})
    assert proc.returncode == 2 and "MEMSLEUTH_MACHINE_LABEL" in proc.stderr and "\x1b" not in proc.stderr


def test_a_program_path_that_is_not_utf8_is_stored_and_shown_losslessly(tmp_path):
    prog = os.path.join(os.fsencode(tmp_path), b"tr\xffue")
    shutil.copy("/bin/true", prog)
    db = str(tmp_path / "n.db").encode()
    proc = subprocess.run([sys.executable.encode(), b"-m", b"memsleuth", b"check", b"--db", db, b"--no-where", b"--",
                           prog], capture_output=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr
    assert b"tr\\xffue" in proc.stdout
    hist = memsleuth("history", "--db", db.decode())
    assert "tr\\xffue" in hist.stdout, hist.stdout
    command = json.loads(sqlite3.connect(db.decode()).execute("select command from cells").fetchone()[0])
    assert os.fsencode(command[0]) == prog       # the path as it was, byte for byte
