"""Runs travel between stores (merge, by run UUID) and runs from different machines are shown side
by side (show RUN RUN)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import pytest

from conftest import memsleuth

SMALL = ["--alloc", "glibc", "--param", "ws=400", "--param", "iterations=20000", "--reps", "2", "--no-reference"]


def _compare(db, *extra):
    proc = memsleuth("compare", *SMALL, *extra, "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    return proc


def test_merge_is_idempotent_and_keeps_machine_and_allocators(tmp_path):
    a, b, target = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "t.db"
    _compare(a, "--machine-label", "box-a")
    _compare(b, "--machine-label", "box-b")
    _compare(b, "--machine-label", "box-b")
    first = memsleuth("merge", str(a), str(b), "--db", str(target))
    assert first.returncode == 0, first.stderr
    assert "1 run(s) added" in _words(first.stdout) and "2 run(s) added" in _words(first.stdout)
    again = memsleuth("merge", str(a), str(b), "--db", str(target))
    assert again.returncode == 0 and "0 run(s) added" in _words(again.stdout) and "already in" in _words(again.stdout)
    con = sqlite3.connect(target)
    rows = con.execute("SELECT uuid, machine FROM runs ORDER BY id").fetchall()
    assert len(rows) == 3 and len({r[0] for r in rows}) == 3
    labels = [json.loads(m)["label"] for _, m in rows]
    assert labels == ["box-a", "box-b", "box-b"]
    assert all(json.loads(m)["allocators"] for _, m in rows)
    src = sqlite3.connect(a).execute("SELECT count(*) FROM samples").fetchone()[0]
    got = con.execute("SELECT count(*) FROM samples s JOIN cells c ON c.id = s.cell_id WHERE c.run_id = 1").fetchone()[0]
    assert got == src
    shown = memsleuth("show", "1", "--db", str(target))
    assert shown.returncode == 0 and "glibc" in shown.stdout


def test_an_old_store_gets_stable_run_identities(tmp_path):
    """A schema-2 store (no uuid column) merged twice, before and after its own migration, adds
    its runs once."""
    old, target = tmp_path / "old.db", tmp_path / "t.db"
    _compare(old)
    con = sqlite3.connect(old)
    con.execute("DROP INDEX runs_uuid")
    con.execute("ALTER TABLE runs DROP COLUMN uuid")
    con.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    con.commit()
    con.close()
    assert memsleuth("merge", str(old), "--db", str(target)).returncode == 0
    _compare(old)   # a write migrates the old store to schema 3, deriving the same identity
    again = memsleuth("merge", str(old), "--db", str(target))
    assert again.returncode == 0 and "1 run(s) added, 1 already in" in _words(again.stdout)


@pytest.mark.parametrize("make,message", [
    (lambda p: p.write_text("not a database"), "not an SQLite database"),
    (lambda p: sqlite3.connect(p).execute("CREATE TABLE t (x)").connection.commit(), "another program"),
    (None, "no such store"),
])
def test_merge_refuses_a_source_that_is_not_a_store_and_writes_nothing(tmp_path, make, message):
    src, target = tmp_path / "src.db", tmp_path / "t.db"
    if make:
        make(src)
    _compare(target)
    before = target.read_bytes()
    proc = memsleuth("merge", str(src), "--db", str(target))
    assert proc.returncode == 2 and message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert target.read_bytes() == before, "the target was written to"


def test_merge_refuses_a_newer_schema_and_itself(tmp_path):
    src, target = tmp_path / "new.db", tmp_path / "t.db"
    _compare(src)
    con = sqlite3.connect(src)
    con.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    con.commit()
    proc = memsleuth("merge", str(src), "--db", str(target))
    assert proc.returncode == 2 and "newer memsleuth" in proc.stderr and not target.exists()
    _compare(target)
    same = memsleuth("merge", str(target), "--db", str(target))
    assert same.returncode == 2 and "target store itself" in same.stderr


def test_show_puts_two_machines_side_by_side(tmp_path):
    db, js, md = tmp_path / "m.db", tmp_path / "m.json", tmp_path / "m.md"
    _compare(db, "--machine-label", "skylake")
    _compare(db, "--machine-label", "epyc")
    proc = memsleuth("show", "1", "2", "--db", str(db), "--json", str(js), "--md", str(md))
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "By machine" in text and "Machines" in text
    assert "skylake (run 1)" in text and "epyc (run 2)" in text
    assert "fastest machine" in text
    doc = json.loads(js.read_text())
    assert doc["schema"] == "memsleuth.machines/1" and len(doc["runs"]) == 2
    assert {r["run"]["machine"]["label"] for r in doc["runs"]} == {"skylake", "epyc"}
    assert "numa_nodes" in doc["runs"][0]["run"]["machine"]
    assert "skylake" in md.read_text() and "## Machines" in md.read_text()


def test_a_bad_machine_label_is_refused(tmp_path):
    proc = memsleuth("compare", *SMALL, "--machine-label", "a b[red]", "--db", str(tmp_path / "x.db"))
    assert proc.returncode == 2 and "bad --machine-label" in proc.stderr


def _words(text: str) -> str:
    """Output with its line breaks as spaces: a line naming two temporary paths is wrapped where the
    paths are long (pytest-xdist's workers add a folder to each)."""
    return " ".join(text.split())


def _on_another_host(*args: str) -> subprocess.CompletedProcess:
    """memsleuth in a UTS namespace of its own, under another host name (root)."""
    return subprocess.run(["unshare", "--uts", "--", "sh", "-c", 'hostname memsleuth-other-host && exec "$@"', "sh",
                           sys.executable, "-m", "memsleuth", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})


def _status_line(text: str) -> str:
    return next((ln for ln in text.splitlines() if "compare" in ln), "")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="a second host name needs root (unshare --uts)")
def test_a_killed_run_reads_interrupted_on_every_host_before_and_after_merge(tmp_path):
    from memsleuth.records.store import HEARTBEAT_S, STALE_S
    db, target = tmp_path / "k.db", tmp_path / "team.db"
    p = subprocess.Popen([sys.executable, "-m", "memsleuth", "compare", "--alloc", "glibc", "--reps", "60",
                          "--db", str(db), "--", "sleep", "0.2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # the writer's heartbeat moves while it runs
        deadline = time.monotonic() + 6 * HEARTBEAT_S
        beat = None
        while time.monotonic() < deadline:
            time.sleep(0.2)
            try:
                beat = sqlite3.connect(db).execute("SELECT created_at < heartbeat_at FROM runs").fetchone()
            except sqlite3.OperationalError:   # the file exists a moment before its tables do
                continue
            if beat and beat[0]:
                break
        assert beat and beat[0], "no heartbeat after the run began"
        elsewhere = _on_another_host("history", "--db", str(db))
        assert elsewhere.returncode == 0, elsewhere.stderr
        assert f"running (on {socket.gethostname()})" in _status_line(elsewhere.stdout)
        p.send_signal(signal.SIGKILL)
        time.sleep(0.5)
        # here, at once, though the killed writer is not reaped yet (a zombie keeps its pid)
        here = memsleuth("history", "--db", str(db))
        assert "interrupted" in _status_line(here.stdout) and "running" not in here.stdout, here.stdout
    finally:
        p.kill()
        p.wait()
    # elsewhere the heartbeat decides: fresh, the run may be alive, and merge leaves it for later
    merged = _on_another_host("merge", str(db), "--db", str(target))
    assert merged.returncode == 0 and "1 still running" in _words(merged.stdout), merged.stdout + merged.stderr
    # ... until its last sign of life is older than STALE_S (aged here rather than waited for)
    old = (datetime.now(timezone.utc) - timedelta(seconds=STALE_S + 5)).isoformat(timespec="seconds")
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET heartbeat_at=?, created_at=?", (old, old))
    con.execute("UPDATE samples SET created_at=?", (old,))
    con.commit()
    con.close()
    elsewhere = _on_another_host("history", "--db", str(db))
    assert "interrupted" in _status_line(elsewhere.stdout), elsewhere.stdout
    merged = _on_another_host("merge", str(db), "--db", str(target))
    assert merged.returncode == 0 and "1 run(s) added" in _words(merged.stdout), merged.stdout + merged.stderr
    for reader in (memsleuth, _on_another_host):
        hist = reader("history", "--db", str(target))
        assert "interrupted" in _status_line(hist.stdout) and "running" not in hist.stdout, hist.stdout
    kept = sqlite3.connect(target).execute("SELECT count(*) FROM samples").fetchone()[0]
    assert kept >= 1
