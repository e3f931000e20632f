"""The store on a real PostgreSQL: a throw-away cluster from Debian's pg_virtualenv, and compare,
show, diff, history, export and merge against it; unreachable and refused connections. Root only."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

from conftest import memsleuth

REASON = None
if os.geteuid() != 0:
    REASON = "not root: pg_virtualenv needs root to create a throw-away cluster (`make test` as root, as CI does)"
elif shutil.which("pg_virtualenv") is None:
    REASON = "PostgreSQL not installed (pg_virtualenv missing): `make test` as root installs postgresql"
else:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        REASON = "psycopg not installed: `make setup` installs it"
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

SMALL = ["--alloc", "glibc", "--param", "ws=400", "--param", "iterations=20000", "--reps", "3"]


@pytest.fixture(scope="module")
def pg_url():
    """pg_virtualenv runs a helper that prints the cluster's address and waits; closing its stdin
    ends it, and pg_virtualenv drops the cluster."""
    helper = ("import os, sys; e = os.environ; print('postgresql://%s:%s@%s:%s/%s' % (e['PGUSER'], e['PGPASSWORD'], "
              "e['PGHOST'], e['PGPORT'], e['PGDATABASE']), flush=True); sys.stdin.read()")
    proc = subprocess.Popen(["pg_virtualenv", "--", sys.executable, "-c", helper], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = ""
    while proc.poll() is None:
        line = proc.stdout.readline()
        if line.startswith("postgresql://"):
            url = line.strip()
            break
    if not url:
        pytest.fail("pg_virtualenv did not start a cluster: " + proc.stderr.read()[-800:])
    yield url
    proc.stdin.close()
    proc.wait(timeout=120)


def test_compare_show_diff_history_export_on_postgres(pg_url, tmp_path):
    for _ in range(2):
        proc = memsleuth("compare", *SMALL, "--db", pg_url)
        assert proc.returncode == 0, proc.stderr
    password = pg_url.split(":")[2].split("@")[0]
    hist = memsleuth("history", "--db", pg_url)
    assert hist.returncode == 0 and password not in hist.stdout and "***" in hist.stdout
    assert memsleuth("show", "1", "--db", pg_url).returncode == 0
    diff = memsleuth("diff", "1", "2", "--db", pg_url)
    assert diff.returncode in (0, 1) and "normalised change" in diff.stdout
    js = tmp_path / "e.json"
    exp = memsleuth("export", "2", "--format", "json", "-o", str(js), "--db", pg_url)
    assert exp.returncode == 0, exp.stderr
    doc = json.loads(js.read_text())
    assert doc["run"]["id"] == 2 and password not in js.read_text()
    side = memsleuth("show", "1", "2", "--db", pg_url)
    assert side.returncode == 0 and "By machine" in side.stdout


def test_merge_sqlite_into_postgres_and_back(pg_url, tmp_path):
    local = tmp_path / "local.db"
    proc = memsleuth("compare", *SMALL, "--machine-label", "laptop", "--db", str(local))
    assert proc.returncode == 0, proc.stderr
    first = memsleuth("merge", str(local), "--db", pg_url)
    assert first.returncode == 0 and "1 run(s) added" in first.stdout, first.stderr
    again = memsleuth("merge", str(local), "--db", pg_url)
    assert "0 run(s) added" in again.stdout
    back = tmp_path / "back.db"
    out = memsleuth("merge", pg_url, "--db", str(back))
    assert out.returncode == 0, out.stderr
    labels = [json.loads(m).get("label") for (m,) in sqlite3.connect(back).execute("SELECT machine FROM runs")]
    assert "laptop" in labels


@pytest.mark.parametrize("mangle,message", [
    (lambda u: u.replace(u.split(":")[2].split("@")[0], "wrong"), "password authentication failed"),
    (lambda u: "postgresql://nobody@127.0.0.1:1/none", "cannot connect"),
])
def test_unusable_postgres_is_one_line_exit_2(pg_url, mangle, message):
    url = mangle(pg_url)
    proc = memsleuth("compare", *SMALL, "--db", url)
    assert proc.returncode == 2 and message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "wrong@" not in proc.stderr   # the password is never printed


def test_a_least_privilege_role_can_use_a_store_its_owner_made(pg_url, tmp_path):
    """The documented roles (docs/fleet.md, "PostgreSQL roles"): the owner creates the schema once;
    a writer needs only SELECT, INSERT, UPDATE on the tables and USAGE on their sequences; a reader
    only SELECT. No CREATE on the schema for either."""
    import psycopg
    assert memsleuth("compare", *SMALL, "--db", pg_url).returncode == 0   # the owner makes the schema
    with psycopg.connect(pg_url, autocommit=True) as con:
        for role, grants in (("ms_writer", "SELECT, INSERT, UPDATE"), ("ms_reader", "SELECT")):
            con.execute(f"DROP ROLE IF EXISTS {role}")
            con.execute(f"CREATE ROLE {role} LOGIN PASSWORD 'pw_{role}'")
            con.execute(f"GRANT {grants} ON ALL TABLES IN SCHEMA public TO {role}")
            con.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {role}")
            con.execute(f"REVOKE CREATE ON SCHEMA public FROM {role}")
    rest = pg_url.split("@", 1)[1]
    writer, reader = f"postgresql://ms_writer:pw_ms_writer@{rest}", f"postgresql://ms_reader:pw_ms_reader@{rest}"
    proc = memsleuth("compare", *SMALL, "--db", writer)
    assert proc.returncode == 0, proc.stderr
    hist = memsleuth("history", "--db", reader)
    assert hist.returncode == 0, hist.stderr
    assert "pw_ms_reader" not in hist.stdout + hist.stderr
    refused = memsleuth("compare", *SMALL, "--db", reader)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr and "pw_ms_reader" not in refused.stderr


def test_a_killed_writer_reads_interrupted_on_every_host_on_postgres(pg_url, tmp_path):
    """Liveness is judged alike by every host in a shared PostgreSQL store: by the writer's
    process on its own host, by its heartbeat elsewhere (here a second host name: a UTS namespace)."""
    import signal
    import socket
    import time
    from datetime import datetime, timedelta, timezone
    import psycopg
    from memsleuth.records.store import STALE_S
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) missing: no second host name")

    def other_host(*args):
        return subprocess.run(["unshare", "--uts", "--", "sh", "-c", 'hostname memsleuth-other-host && exec "$@"', "sh",
                               sys.executable, "-m", "memsleuth", *args], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "COLUMNS": "200"})

    def line(text):
        return next((ln for ln in text.splitlines() if "--reps 60" in ln), "")

    p = subprocess.Popen([sys.executable, "-m", "memsleuth", "compare", "--alloc", "glibc", "--reps", "60", "--db",
                          pg_url, "--", "sleep", "0.2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            time.sleep(0.1)
            with psycopg.connect(pg_url) as con:
                n = con.execute("SELECT count(*) FROM samples s JOIN cells c ON c.id = s.cell_id JOIN runs r "
                                "ON r.id = c.run_id WHERE r.status = 'running'").fetchone()[0]
            if n >= 2:
                break
        p.send_signal(signal.SIGKILL)
        time.sleep(0.5)
        here = memsleuth("history", "--db", pg_url)
        assert "interrupted" in line(here.stdout), here.stdout
    finally:
        p.kill()
        p.wait()
    assert f"running (on {socket.gethostname()})" in line(other_host("history", "--db", pg_url).stdout)
    old = (datetime.now(timezone.utc) - timedelta(seconds=STALE_S + 5)).isoformat(timespec="seconds")
    with psycopg.connect(pg_url) as con:    # a minute later, as far as the heartbeat can tell
        con.execute("UPDATE runs SET heartbeat_at=%s, created_at=%s WHERE status='running'", (old, old))
        con.execute("UPDATE samples SET created_at=%s WHERE cell_id IN (SELECT c.id FROM cells c JOIN runs r ON "
                    "r.id = c.run_id WHERE r.status='running')", (old,))
    assert "interrupted" in line(other_host("history", "--db", pg_url).stdout)
    local = tmp_path / "copy.db"
    merged = other_host("merge", pg_url, "--db", str(local))
    assert merged.returncode == 0 and "still running" not in merged.stdout, merged.stdout + merged.stderr
    hist = memsleuth("history", "--db", str(local))
    assert "interrupted" in line(hist.stdout) and "running" not in line(hist.stdout), hist.stdout
