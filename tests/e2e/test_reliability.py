"""Issue 10: nothing a user types or a program does breaks a report, fakes a status, or leaves a
run half-told. Real processes, real files: a real non-PIE program, a real tmpfs that fills up, a
real SIGKILL, a real unprivileged user."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memsleuth.measure import allocators
from conftest import ROOT, fixture, memsleuth, needs_tracepoints

QUICK = ["--param", "iterations=2000", "--param", "ws=20", "--reps", "2"]
IS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not IS_ROOT, reason="needs root (tmpfs mounts, another user)")


def _other_allocator():
    a = next((a for a in allocators.available() if a.preload), None)
    if a is None:
        pytest.skip("no allocator package installed besides glibc")
    return a


def _no_traceback(proc):
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr


# ---- 1. help -------------------------------------------------------------------------------

@pytest.mark.parametrize("cmd", ["compare", "case", "check", "show", "diff", "history", "export", "doctor"])
def test_every_help_prints(cmd):
    proc = memsleuth(cmd, "--help")
    assert proc.returncode == 0 and "usage:" in proc.stdout, proc.stderr
    _no_traceback(proc)


# ---- 2, 3. user text is data ---------------------------------------------------------------

HOSTILE = ["[/]", "[reverse blink]x", "<script>alert(1)</script>", "a|b", "`tick`", "line1\nline2"]


def test_markup_and_html_in_argv_and_stderr_stay_text(tmp_path):
    db, md = tmp_path / "h.db", tmp_path / "h.md"
    script = "echo '[/] [bold]x <script>alert(1)</script> |pipe| `tick`' >&2; exit 1"
    proc = memsleuth("compare", "--alloc", "glibc", "--reps", "2", "--db", str(db), "--md", str(md), "--",
                     "sh", "-c", script, *HOSTILE)
    assert proc.returncode == 3, proc.stderr  # every run failed: no result
    _no_traceback(proc)
    assert "[/]" in proc.stdout and "[reverse blink]x" in proc.stdout
    for cmd in (["history"], ["show"], ["show", "1", "--md", str(tmp_path / "s.md")], ["diff", "1", "1"]):
        shown = memsleuth(*cmd, "--db", str(db))
        _no_traceback(shown)
        assert shown.returncode in (0, 1), (cmd, shown.stderr)
    assert "[/]" in memsleuth("history", "--db", str(db)).stdout
    text = md.read_text()
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert "\\|pipe\\|" in text and "\\`tick\\`" in text
    for line in text.splitlines():  # a newline in argv never breaks a table row
        if line.startswith("|"):
            assert line.endswith("|"), line


def test_check_on_hostile_text(tmp_path):
    proc = memsleuth("check", "--db", str(tmp_path / "c.db"), "--md", str(tmp_path / "c.md"), "--",
                     "sh", "-c", "echo '[/]<b>' ; echo '[/]' >&2", "[/]")
    assert proc.returncode == 0, proc.stderr
    assert "[/]" in proc.stdout and "<b>" not in (tmp_path / "c.md").read_text()


def test_quality_rows_keep_their_bracketed_labels(tmp_path):
    proc = memsleuth("compare", "--alloc", "glibc", "--param", "iterations=2000", "--param", "ws=10,20",
                     "--reps", "3", "--db", str(tmp_path / "q.db"))
    assert proc.returncode == 0, proc.stderr
    quality = proc.stdout[proc.stdout.index("Measurement quality"):]
    assert "glibc [ws=10]" in quality and "glibc [ws=20]" in quality


def test_an_allocator_named_in_capitals_is_not_painted_as_a_failure(tmp_path):
    # The terminal paints failures from the status, not from the look of the text.
    from rich.console import Console
    from memsleuth.report import content, terminal
    report = content.Report("t", [], [content.Table("T", ["allocator", "status"], [["HAKMEM", "OOM"]],
                                                failed={(0, 1)})])
    console = Console(record=True, width=80, force_terminal=True, color_system="truecolor")
    terminal.render(report, console)
    out = console.export_text(styles=True)
    hak = out[out.index("HAKMEM") - 30:out.index("HAKMEM")]
    oom = out[out.index("OOM") - 30:out.index("OOM")]
    assert "\x1b[1;31m" not in hak and "\x1b[1;31m" in oom


# ---- 4. non-PIE programs ----------------------------------------------------------------------

def test_non_pie_python_is_not_preload_failed(tmp_path):
    a = _other_allocator()
    proc = memsleuth("compare", "--alloc", f"glibc,{a.name}", "--reps", "2", "--db", str(tmp_path / "p.db"),
                     "--json", str(tmp_path / "p.json"), "--", "python3", "-c", "pass")
    assert proc.returncode == 0, proc.stderr
    assert "PRELOAD-FAILED" not in proc.stdout
    doc = json.loads((tmp_path / "p.json").read_text())
    assert all(s["status"] == "ok" for c in doc["cells"] for s in c["samples"])


def test_measured_runs_do_not_carry_the_checker(tmp_path):
    # The preload check runs the command only to its first instruction; no measured run maps
    # libmscheck.so (it cost 4 mmap and 9-13 faults per process when it stayed).
    proc = memsleuth("compare", "--alloc", "glibc", "--reps", "2", "--db", str(tmp_path / "m.db"),
                     "--json", str(tmp_path / "m.json"), "--", "sh", "-c", "grep -c mscheck /proc/self/maps; true")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "m.json").read_text())
    for s in doc["cells"][0]["samples"]:
        assert s["stdout_tail"].strip() == "0", s["stdout_tail"]


# ---- 5, 6. the process tree ------------------------------------------------------------------

def test_memory_cap_covers_children(tmp_path):
    proc = memsleuth("compare", "--alloc", "glibc", "--reps", "1", "--mem-limit", "200M", "--db",
                     str(tmp_path / "o.db"), "--", "sh", "-c",
                     "python3 -c 'a=[bytearray(1<<20) for _ in range(600)]'; true")
    assert proc.returncode == 3, proc.stderr
    assert "OOM" in proc.stdout


def test_escaped_processes_are_ended_and_reported(tmp_path):
    marker = f"{os.getpid()}{time.monotonic_ns() % 100000}"
    proc = memsleuth("compare", "--alloc", "glibc", "--reps", "1", "--db", str(tmp_path / "e.db"), "--",
                     "sh", "-c", f"setsid sleep {marker} & sleep 0.1")
    assert proc.returncode == 0, proc.stderr
    left = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True).stdout.split()
    assert not left, "a process started by the measured command outlived it"
    assert "processes it left running: sleep" in proc.stdout


# ---- 7, 8. runs that end badly read as such ---------------------------------------------------

@pytest.mark.parametrize("value", ["1e9", "1e12", "1e400"])
def test_huge_timeouts_are_refused_before_a_run_begins(tmp_path, value):
    db = tmp_path / "t.db"
    proc = memsleuth("compare", "--alloc", "glibc", *QUICK, "--timeout", value, "--db", str(db))
    assert proc.returncode == 2 and "none for no limit" in proc.stderr
    _no_traceback(proc)
    assert not db.exists() or "running" not in memsleuth("history", "--db", str(db)).stdout


def test_timeout_none_means_no_limit(tmp_path):
    proc = memsleuth("compare", "--alloc", "glibc", *QUICK, "--timeout", "none", "--db", str(tmp_path / "n.db"))
    assert proc.returncode == 0, proc.stderr


def test_a_killed_compare_reads_interrupted(tmp_path):
    db = tmp_path / "k.db"
    p = subprocess.Popen([sys.executable, "-m", "memsleuth", "compare", "--alloc", "glibc", "--reps", "30",
                          "--db", str(db), "--", "sleep", "0.2"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        time.sleep(0.1)
        try:  # the file exists a moment before its tables do
            if db.exists() and sqlite3.connect(db).execute("SELECT count(*) FROM samples").fetchone()[0] >= 2:
                break
        except sqlite3.OperationalError:
            continue
    p.send_signal(signal.SIGKILL)
    p.wait()
    hist = memsleuth("history", "--db", str(db))
    assert hist.returncode == 0, hist.stderr
    assert "interrupted" in hist.stdout and "running" not in hist.stdout
    shown = memsleuth("show", "--db", str(db))
    assert shown.returncode == 0 and "interrupted" in shown.stdout


# ---- 9. full disks and broken stores ----------------------------------------------------------

@pytest.fixture
def tiny_fs(tmp_path):
    if not IS_ROOT:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)])


def _fill(mnt: Path, leave_kb: int) -> None:
    st = os.statvfs(mnt)
    free = st.f_bavail * st.f_frsize
    try:
        with open(mnt / "filler", "ab") as f:
            if leave_kb:
                f.write(b"\0" * max(0, free - leave_kb * 1024))
                return
            while True:
                f.write(b"\0" * 4096)
                f.flush()
    except OSError:
        pass


def test_disk_full_during_a_run_is_one_line_and_keeps_what_was_stored(tiny_fs):
    db = tiny_fs / "full.db"
    _fill(tiny_fs, 200)
    proc = memsleuth("compare", "--alloc", "glibc", "--reps", "60", "--db", str(db), "--", "sh", "-c",
                     "head -c 3000 /dev/urandom | base64 >&2")
    _no_traceback(proc)
    assert proc.returncode == 4 and "disk is full" in proc.stderr, proc.stderr
    hist = memsleuth("history", "--db", str(db))
    assert hist.returncode == 0, hist.stderr
    assert ("interrupted" in hist.stdout or "failed" in hist.stdout) and "running" not in hist.stdout, hist.stdout


def test_disk_full_while_writing_reports_leaves_no_empty_files(tmp_path, tiny_fs):
    db = tmp_path / "ok.db"
    ok = memsleuth("compare", "--alloc", "glibc", "--reps", "2", "--db", str(db), "--", "true")
    assert ok.returncode == 0, ok.stderr
    (tiny_fs / "old.md").write_text("x")  # an earlier file of the same name is left as it was
    _fill(tiny_fs, 0)
    for args in (["show", "--md", str(tiny_fs / "old.md")], ["show", "--json", str(tiny_fs / "r.json")],
                 ["export", "1", "--output", str(tiny_fs / "r.csv"), "--format", "csv"],
                 ["export", "1", "--output", str(tiny_fs / "r.json")]):
        proc = memsleuth(*args, "--db", str(db))
        _no_traceback(proc)
        assert proc.returncode == 4 and "nothing was written" in proc.stderr, (args, proc.stderr)
    assert (tiny_fs / "old.md").read_text() == "x"
    assert sorted(p.name for p in tiny_fs.iterdir()) == ["filler", "old.md"]


def test_a_store_with_a_damaged_page_is_not_appended_to(tmp_path):
    db = tmp_path / "d.db"
    assert memsleuth("compare", "--alloc", "glibc", *QUICK, "--db", str(db)).returncode == 0
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page = con.execute("PRAGMA page_size").fetchone()[0]
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name='samples'").fetchone()[0]
    con.close()
    data = bytearray(db.read_bytes())
    data[(root - 1) * page:(root - 1) * page + 64] = b"\xee" * 64  # wreck the samples table's root page
    db.write_bytes(bytes(data))
    for cmd in (["compare", "--alloc", "glibc", *QUICK], ["show"], ["export", "1"], ["history"]):
        proc = memsleuth(*cmd, "--db", str(db))
        _no_traceback(proc)
        assert proc.returncode in (0, 4), (cmd, proc.stderr)
        if proc.returncode == 4:
            assert "damaged" in proc.stderr
    assert memsleuth("compare", "--alloc", "glibc", *QUICK, "--db", str(db)).returncode == 4


def test_another_programs_sqlite_is_refused_and_left_alone(tmp_path):
    db = tmp_path / "other.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE runs (x INTEGER)")
    con.commit()
    con.close()
    for cmd in (["history"], ["show"], ["compare", "--alloc", "glibc", *QUICK]):
        proc = memsleuth(*cmd, "--db", str(db))
        assert proc.returncode == 2 and "another program" in proc.stderr, (cmd, proc.stderr)
    tables = {r[0] for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master")}
    assert tables == {"runs"}


def test_reading_commands_never_create_tables(tmp_path):
    db = tmp_path / "empty.db"
    sqlite3.connect(db).close()
    proc = memsleuth("history", "--db", str(db))
    assert proc.returncode == 2
    assert not list(sqlite3.connect(db).execute("SELECT name FROM sqlite_master"))


def _as_nobody(*args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    """memsleuth as the unprivileged user `nobody`, through the system python3 (the venv's python
    lives under /root) with this environment's packages on its path."""
    if not IS_ROOT:
        pytest.skip("needs root to switch to another user")
    site = [p for p in sys.path if p.endswith("site-packages")]
    src = ":".join(os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(":") if p)
    system = "/usr/bin/python3"
    probe = subprocess.run(["runuser", "-u", "nobody", "--", system, "-c",
                            f"import sys; sys.path[:0]={[*src.split(':'), *site]!r}; import memsleuth, rich, numpy"],
                           capture_output=True, text=True)
    if probe.returncode != 0 or sys.version_info[:2] != (3, 11):
        pytest.skip(f"the system python3 cannot import memsleuth as nobody: {probe.stderr.strip()[-200:]}")
    code = (f"import sys; sys.path[:0]={[*src.split(':'), *site]!r}; from memsleuth.cli import main; "
            f"sys.exit(main({list(args)!r}))")
    env = {"PATH": os.environ["PATH"], "COLUMNS": "200", **(env_extra or {})}
    if "MEMSLEUTH_NATIVE_DIR" in os.environ:
        env["MEMSLEUTH_NATIVE_DIR"] = os.path.abspath(os.environ["MEMSLEUTH_NATIVE_DIR"])
    return subprocess.run(["runuser", "-u", "nobody", "--", system, "-c", code], capture_output=True, text=True,
                          env=env, cwd="/")


@pytest.fixture
def open_dir():
    """A folder another user can reach (pytest's own tmp folders are private to root)."""
    import shutil
    import tempfile
    d = Path(tempfile.mkdtemp(prefix="memsleuth-test-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_a_read_only_store_of_another_user_can_be_read(open_dir):
    tmp_path = open_dir
    d = tmp_path / "shared"
    d.mkdir()
    db = d / "r.db"
    assert memsleuth("compare", "--alloc", "glibc", *QUICK, "--db", str(db)).returncode == 0
    for p in (tmp_path, d):
        p.chmod(0o755)
    for p in d.iterdir():
        p.chmod(0o644)
    for cmd in (["history"], ["show", "1"], ["export", "1", "--format", "csv"]):
        proc = _as_nobody(*cmd, "--db", str(db))
        assert proc.returncode == 0, (cmd, proc.stderr)
        _no_traceback(proc)
    proc = _as_nobody("compare", "--alloc", "glibc", *QUICK, "--db", str(db))
    assert proc.returncode == 4 and "not writable" in proc.stderr


def test_unprivileged_regions_still_count_faults(open_dir):
    tmp_path = open_dir
    js = tmp_path / "u.json"
    tmp_path.chmod(0o777)
    proc = _as_nobody("check", "--db", str(tmp_path / "u.db"), "--json", str(js), "--", fixture("fx-regions"), "512")
    assert proc.returncode == 0, proc.stderr
    regions = json.loads(js.read_text())["cells"][0]["samples"][0]["regions"]
    touch = next(r for r in regions if r["name"] == "touch")
    assert touch["counters"]["page-faults-minor"] >= 512


def test_doctor_says_not_permitted_rather_than_absent():
    proc = _as_nobody("doctor")
    assert proc.returncode == 0, proc.stderr
    pmu = next(line for line in proc.stdout.splitlines() if "PMU" in line)
    events = subprocess.run([os.environ.get("MEMSLEUTH_NATIVE_DIR", "") + "/ms-run" if os.environ.get(
        "MEMSLEUTH_NATIVE_DIR") else str(Path(allocators.native.ms_run())), "--events"], capture_output=True, text=True)
    if "cycles" in json.loads(events.stdout).get("opened", []):
        assert "not permitted" in pmu or "present" in pmu


def test_an_aborting_constructor_is_refused_with_its_reason(tmp_path):
    proc = memsleuth("compare", "--alloc", f"bad={fixture('libfx-ctor_abort.so')}", *QUICK, "--db",
                     str(tmp_path / "x.db"))
    assert proc.returncode == 2 and "SIGABRT" in proc.stderr and "aborting on purpose" in proc.stderr
    _no_traceback(proc)


def test_a_library_that_preloads_but_does_not_dlopen_is_accepted():
    je = allocators._find_library(allocators.KNOWN["jemalloc"])
    if je is None:
        pytest.skip("jemalloc not installed")
    (a,) = allocators.resolve(f"je={je}")
    assert a.preload == os.path.realpath(je)


# ---- 10. exit codes ---------------------------------------------------------------------------

def test_no_result_exits_3_and_fail_on_error(tmp_path):
    db = str(tmp_path / "x.db")
    assert memsleuth("compare", "--alloc", "glibc", "--reps", "2", "--db", db, "--", fixture("fx-segv")).returncode == 3
    ok = memsleuth("check", "--db", db, "--", "true")
    assert ok.returncode == 0
    flaky = "test $(( $(date +%N) % 2 )) -eq 0 || kill -SEGV $$"
    p = memsleuth("check", "--reps", "8", "--fail-on-error", "--db", db, "--", "sh", "-c", flaky)
    assert p.returncode in (0, 3)


# ---- 11. what was measured is shown -----------------------------------------------------------

def test_env_is_shown_and_a_diff_across_environments_says_so(tmp_path):
    db = str(tmp_path / "v.db")
    a = memsleuth("compare", "--alloc", "glibc", *QUICK, "--db", db)
    b = memsleuth("compare", "--alloc", "glibc", *QUICK, "--db", db, "--env", "GLIBC_TUNABLES=glibc.malloc.arena_max=1")
    assert a.returncode == 0 and b.returncode == 0, b.stderr
    assert "environment: GLIBC_TUNABLES=glibc.malloc.arena_max=1" in b.stdout
    assert "GLIBC_TUNABLES=glibc.malloc.arena_max=1" in memsleuth("show", "2", "--db", db).stdout
    d = memsleuth("diff", "1", "2", "--db", db)
    assert "environments differ" in d.stdout


@pytest.mark.parametrize("args,needle", [
    (["--env", "GLIBC_TUNABLES=garbage"], "not NAME=VALUE"),
    (["--env", "GLIBC_TUNABLES=glibc.malloc.arena_mx=1"], "unknown tunable"),
    (["--env", "GLIBC_TUNABLES=glibc.malloc.top_pad=64M"], "glibc would read 64 and ignore 'M'"),
    (["--alloc", "glibc", "--alloc", "glibc"], "--alloc given twice"),
    (["--reps", "2", "--reps", "3"], "--reps given twice"),
    (["--env", "A=1", "--env", "A=2"], "--env A given twice"),
])
def test_silent_surprises_are_refused(tmp_path, args, needle):
    proc = memsleuth("compare", *args, "--db", str(tmp_path / "s.db"), "--", "true")
    assert proc.returncode == 2 and needle in proc.stderr, proc.stderr


def test_commands_are_shown_shell_quoted(tmp_path):
    db = str(tmp_path / "q.db")
    proc = memsleuth("compare", "--alloc", "glibc", "--reps", "2", "--db", db, "--", "sh", "-c", "echo 'a b'")
    assert "command: sh -c 'echo '\"'\"'a b'\"'\"''" in proc.stdout
    assert "-- sh -c 'echo" in memsleuth("history", "--db", db).stdout


# ---- 12. smaller ones ------------------------------------------------------------------------

def test_few_runs_still_get_spread_warnings():
    from memsleuth.analysis import quality
    codes = {w.code for w in quality.cell_warnings("c", [1.0, 1.02, 1.6, 0.99, 1.01])}
    assert {"few-samples", "cv", "outliers"} <= codes


def test_csv_keeps_full_precision(tmp_path):
    db = str(tmp_path / "c.db")
    assert memsleuth("compare", "--alloc", "glibc", *QUICK, "--db", db).returncode == 0
    text = memsleuth("export", "1", "--format", "csv", "--db", db).stdout
    assert "e+0" not in text
    rows = text.splitlines()
    header = rows[0].split(",")
    col = header.index("ops_per_s")
    values = [r.split(",")[col] for r in rows[1:] if r.split(",")[col]]
    assert values and all(len(v.replace(".", "")) > 6 for v in values)


def test_progress_without_a_terminal_names_the_cell(tmp_path, monkeypatch):
    from memsleuth.measure import runner
    monkeypatch.setattr(runner, "PLAIN_PROGRESS_EVERY_S", 0.0)
    from memsleuth.cli import main
    import io
    import contextlib
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        main(["compare", "--alloc", "glibc", *QUICK, "--db", str(tmp_path / "p.db")])
    lines = [x for x in err.getvalue().splitlines() if "/" in x and "runs" in x]
    assert any("now: glibc [" in x and "ws=20" in x and "seed=" not in x and "elapsed" in x for x in lines), \
        err.getvalue()


def test_example_build_folder_is_ignored():
    out = subprocess.run(["git", "check-ignore", "examples/first_touch/build/x"], cwd=ROOT, capture_output=True)
    assert out.returncode == 0


def test_a_reader_held_open_keeps_its_locks_while_other_stores_come_and_go(tmp_path):
    """Closing any descriptor of a file drops all of this process's POSIX locks on it, SQLite's
    too: a Store reading the header while another Store of this process was open made a later
    writer take itself for the last user and delete the -shm under the reader ("malformed")."""
    import subprocess
    import sys
    from memsleuth.records.store import Store
    db = tmp_path / "s.db"
    Store(db).close()
    reader = Store(db, readonly=True)
    for _ in range(3):
        Store(db, readonly=True).latest_run_id()   # opened and dropped, as a script would
    writer = ("import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
              "[c.execute(\"INSERT OR REPLACE INTO meta VALUES (?, 'v')\", ('k%d' % i,)) for i in range(200)]; "
              "c.commit(); c.close()")
    subprocess.run([sys.executable, "-c", writer, str(db)], check=True)
    assert (tmp_path / "s.db-shm").exists(), "the writer took itself for the last user of the store"
    assert reader.db.execute("SELECT count(*) FROM meta").fetchone()[0] >= 200
    reader.close()
    import sqlite3
    assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_the_tracepoint_holder_is_let_go_without_waiting_for_its_closes(tmp_path, monkeypatch):
    """The holder's closes wait out an RCU grace period per tracepoint; the runs are over by then and
    nothing waits for them. A stand-in holder that, after its stdin closes, waits for a file shows
    that leaving the `with` does not wait, and that the process is still reaped."""
    from memsleuth.measure import native, runner
    gate = tmp_path / "gate"
    holder = tmp_path / "holder"
    holder.write_text(f"#!/bin/sh\necho ready\ncat >/dev/null\nwhile [ ! -e '{gate}' ]; do sleep 0.05; done\n")
    holder.chmod(0o755)
    monkeypatch.setattr(native, "ms_run", lambda: holder)
    h = runner.TracepointHolder()
    with h:
        assert h.proc is not None and h.proc.poll() is None
        before = set(threading.enumerate())
    assert h.proc.poll() is None            # still closing: __exit__ did not wait for it
    reaper, = set(threading.enumerate()) - before   # the one thread that reaps it
    gate.touch()
    reaper.join(timeout=60)
    assert h.proc.returncode == 0


def test_a_released_holder_is_gone_before_the_timed_rounds(tmp_path, monkeypatch):
    """Before compare's timed rounds (which count no syscall), the warm-ups' holder is let go and
    waited for: while it holds a syscall tracepoint, every call of every task takes the slow path."""
    from memsleuth.measure import native, runner
    holder = tmp_path / "holder"
    holder.write_text("#!/bin/sh\necho ready\ncat >/dev/null\nsleep 0.3\n")
    holder.chmod(0o755)
    monkeypatch.setattr(native, "ms_run", lambda: holder)
    h = runner.TracepointHolder()
    with h:
        assert h.proc.poll() is None
        h.release()
        assert h.proc is None and h.released.returncode == 0     # reaped: its closes are done
    assert h.proc is None


@needs_tracepoints
def test_the_explaining_runs_holder_keeps_their_fault_and_mapping_tracepoints_registered():
    """Around the explaining runs the holder also holds the tracepoints they record arguments and
    faults from (an event each, on itself), so that closing them at a run's end costs no grace period;
    the measured runs' holder leaves the page-fault tracepoints alone (registered, they add work to
    every fault)."""
    from memsleuth.measure import native, runner
    events = json.loads(subprocess.run([str(native.ms_run()), "--events"], capture_output=True, text=True,
                                       check=True).stdout)["tracefs"]

    def held(h: runner.TracepointHolder) -> int:
        fds = Path(f"/proc/{h.proc.pid}/fd")
        return sum(1 for fd in fds.iterdir() if os.readlink(fd) == "anon_inode:[perf_event]")

    names = ("syscalls/sys_enter_munmap", "syscalls/sys_enter_madvise", "syscalls/sys_enter_mmap",
             "syscalls/sys_enter_mremap", "syscalls/sys_exit_brk", "syscalls/sys_enter_brk",
             "exceptions/page_fault_user", "exceptions/page_fault_kernel", "mmap/vm_unmapped_area")
    there = sum(1 for n in names if (Path(events) / n / "id").exists())
    with runner.TracepointHolder() as plain, runner.TracepointHolder(args=True) as explaining:
        assert held(explaining) - held(plain) == there > 0, (held(explaining), held(plain), there)


def test_as_nobody_a_count_that_could_not_be_taken_is_never_read_as_zero(open_dir):
    """Without the syscall tracepoints (an unprivileged user), memory given back by munmap is unknown:
    a program that writes every page it maps, then unmaps it, must not read as zero-page reads."""
    tmp_path = open_dir / "nobody"
    tmp_path.mkdir()
    os.chown(tmp_path, 65534, 65534)          # nobody's own folder for its store and report
    prog = ("import mmap\nfor _ in range(24):\n    m = mmap.mmap(-1, 32 << 20)\n"
            "    for off in range(0, 32 << 20, 4096):\n        m[off] = 1\n    m.close()\n")
    js = tmp_path / "n.json"
    proc = _as_nobody("check", "--db", str(tmp_path / "n.db"), "--json", str(js), "--no-where", "--",
                      "/usr/bin/python3", "-c", prog)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(js.read_text())
    found = [f["id"] for c in doc["cells"] for f in c["summary"]["findings"]] + [f["id"] for f in doc["findings"]]
    assert "zero-page-read" not in found, found


# The findings that rest on what an unprivileged user cannot take: syscall counts and arguments
# (the syscalls:* tracepoints) or named kernel chains (/proc/kallsyms).
NEEDS_ROOT = {"mmap-churn", "madvise-storm", "madvise-calls", "heap-trim-churn", "mremap-churn", "lock-contention",
              "zero-page-read", "copy-on-write-faults", "file-backed-faults", "huge-page-zero-fill-faults",
              "unknown-faults"}


@pytest.mark.parametrize("prog,args", [("plain-madvise_pool", []), ("plain-vector", []), ("plain-steps", []),
                                       ("plain-calloc_read", []), ("plain-cow_fork", [])])
def test_as_nobody_no_finding_rests_on_a_count_it_could_not_take(open_dir, prog, args):
    """The non-root pass: programs whose root check names a syscall or fault-kind mechanism. As nobody
    those counts are missing: their rules stay silent (the kernel's share may still be said, as kernel
    time), never a mechanism read from a zero."""
    tmp_path = open_dir / "nobody"
    tmp_path.mkdir()
    os.chown(tmp_path, 65534, 65534)
    js = tmp_path / "n.json"
    proc = _as_nobody("check", "--db", str(tmp_path / "n.db"), "--json", str(js), "--", fixture(prog), *args)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(js.read_text())
    found = {f["id"]: f for c in doc["cells"] for f in c["summary"]["findings"]} | {f["id"]: f for f in doc["findings"]}
    assert not NEEDS_ROOT & set(found), {k: found[k]["title"] for k in NEEDS_ROOT & set(found)}
    assert "counters-unavailable" in found      # and it says what it could not take


def test_a_reader_of_stdout_that_leaves_loses_no_file(tmp_path):
    """`memsleuth show 1 --json f.json | head -2`: the reader leaves, the report's next write fails
    (EPIPE); the JSON asked for is still written and the exit is 0 (rich's own handler exited 1 and
    wrote nothing more)."""
    import shutil
    db = tmp_path / "c.db"
    shutil.copy(ROOT / "tests" / "data" / "check-leak-request.db", db)
    js = tmp_path / "f.json"
    r, w = os.pipe()
    os.close(r)           # the reader is gone before the first write
    try:
        proc = subprocess.run([sys.executable, "-m", "memsleuth", "show", "1", "--db", str(db), "--json", str(js)],
                              stdout=w, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(w)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(js.read_text())["run"]["id"] == 1
    assert "Traceback" not in proc.stderr


def test_a_file_on_stdin_is_every_runs_input_and_a_pipe_is_said_to_be_none(tmp_path):
    """`memsleuth check -- wc -c < FILE`: each run (the measured ones, the explaining one) reads the
    file from its start. Every run read /dev/null before, and nothing said so (`cat nums | memsleuth
    check -- sort -n` measured sort of nothing). A pipe cannot be read again by each run: stderr says
    the command reads /dev/null, and how to give it the input."""
    data = tmp_path / "in.txt"
    data.write_text("x" * 123_457)
    js = tmp_path / "c.json"
    argv = [sys.executable, "-m", "memsleuth", "check", "--db", str(tmp_path / "c.db"), "--reps", "2", "--json", str(js),
            "--", "sh", "-c", "wc -c; head -c 40000000 /dev/zero > /dev/null"]
    with open(data) as given:
        proc = subprocess.run(argv, stdin=given, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "read from its start by each run" in proc.stderr, proc.stderr
    samples = [s for c in json.loads(js.read_text())["cells"] for s in c["samples"]]
    assert len(samples) >= 2 and all(s["stdout_tail"].split() == ["123457"] for s in samples), \
        [(s["round"], s["stdout_tail"]) for s in samples]
    piped = subprocess.run(argv[:6] + ["--", "wc", "-c"], input="y" * 1000, capture_output=True, text=True,
                           timeout=300)
    assert piped.returncode == 0 and "stdin is a pipe" in piped.stderr and "< FILE" in piped.stderr, piped.stderr
