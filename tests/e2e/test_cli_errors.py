"""Every bad input: one line on stderr, exit code 2, no traceback."""
from __future__ import annotations

import pytest

from conftest import fixture, memsleuth


def _one_line_error(proc, needle: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert needle in lines[0], lines[0]


@pytest.mark.parametrize("args, needle", [
    (["compare", "--alloc", "hoard"], "unknown allocator 'hoard'"),
    (["show", "--md", "same.out", "--html", "./same.out"], "name the same file"),
    (["show", "--pprof", "same.out", "--speedscope", "./same.out"], "name the same file"),
    (["compare", "--speedscope", "s.json"], "add --where"),
    (["compare", "--alloc", "x=/nonexistent.so"], "does not exist"),
    (["compare", "--alloc", "x=/etc/passwd"], "not a shared object"),
    (["compare", "--workload", "nope"], "unknown workload 'nope'"),
    (["compare", "--param", "ws=abc"], "must be an integer"),
    (["compare", "--param", "ws=0"], "must be in [1,"),
    (["compare", "--param", "ws=-5"], "must be in [1,"),
    (["compare", "--param", "iterations=1.5"], "must be an integer"),
    (["compare", "--param", "min-size=4"], "must be in [16,"),
    (["compare", "--param", "threads=100000"], "must be in [1, 1024]"),
    (["compare", "--param", "colour=red"], "unknown parameter 'colour'"),
    (["compare", "--param", "min-size=2000"], "must not exceed max-size"),
    (["compare", "--reps", "0"], "--reps must be at least 1"),
    (["compare", "--warmup", "-1"], "--warmup must be 0 to 100"),
    (["compare", "--warmup", "one"], "--warmup must be an integer"),
    (["compare", "--timeout", "-1"], "--timeout must be positive"),
    (["compare", "--mem-limit", "lots"], "bad size"),
    (["compare", "--mem-limit", "99999999999T"], "larger than"),
    (["compare", "--timeout", "inf"], "none for no limit"),
    (["compare", "--timeout", "1e9"], "none for no limit"),
    (["compare", "--timeout", "-1"], "positive"),
    (["compare", "--db", "/nonexistent/dir/x.db"], "is not a directory"),
    (["compare", "--bogus"], "unrecognized arguments"),
    (["compare", "--", "/nonexistent/cmd"], "not an executable"),
    (["compare", "--", "no-such-command-xyz"], "not found in PATH"),
    (["show", "--db", "/nonexistent.db"], "no such database"),
    (["compare", "--target-ci", "2"], "ambiguous"),
    (["compare", "--target-ci", "abc"], "must be a percentage"),
    (["compare", "--min-reps", "10", "--max-reps", "5"], "must not be below --min-reps"),
    (["compare", "--reps", "5", "--target-ci", "1%"], "--reps fixes the number of rounds"),
    (["compare", "--env", "NOEQUALS"], "bad --env"),
    (["compare", "--env", "LD_PRELOAD=x"], "set by memsleuth itself"),
    (["diff", "1", "2", "--db", "/nonexistent.db"], "no such database"),
    (["diff", "1", "2", "--threshold", "150%"], "between 0% and 100%"),
    (["history", "--db", "/nonexistent.db"], "no such database"),
    (["check", "--", "/nonexistent/cmd"], "not an executable"),
    (["check", "--", "no-such-command-xyz"], "not found in PATH"),
    (["check"], "check needs a command"),
    (["check", "--alloc", "glibc,mimalloc", "--", "true"], "check runs one allocator"),
    (["export", "x", "--db", "/nonexistent.db"], "no such database"),
])
def test_bad_input(args, needle):
    _one_line_error(memsleuth(*args), needle)


def test_bad_so_is_refused_before_any_run(tmp_path):
    db = tmp_path / "x.db"
    _one_line_error(memsleuth("compare", "--db", str(db), "--alloc", f"x={fixture('fx-segv')}"), "does not load")
    assert not db.exists()


def test_db_that_is_not_sqlite(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_text("this is not a database\n" * 10)
    _one_line_error(memsleuth("compare", "--db", str(bad), "--param", "iterations=1000", "--reps", "1"),
                    "not an SQLite database")
    _one_line_error(memsleuth("show", "--db", str(bad)), "not an SQLite database")


def test_db_that_is_corrupt(tmp_path):
    db = tmp_path / "c.db"
    ok = memsleuth("compare", "--db", str(db), "--alloc", "glibc", "--param", "iterations=1000", "--param", "ws=10",
                   "--reps", "1")
    assert ok.returncode == 0, ok.stderr
    data = bytearray(db.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # keep the header, wreck the schema page
    db.write_bytes(bytes(data))
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"c.db{suffix}").unlink(missing_ok=True)
    proc = memsleuth("show", "--db", str(db))
    assert proc.returncode == 4 and "damaged" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_db_path_that_is_a_directory(tmp_path):
    _one_line_error(memsleuth("compare", "--db", str(tmp_path)), "is a directory")


def test_unwritable_md_path():
    _one_line_error(memsleuth("compare", "--md", "/nonexistent/dir/r.md"), "cannot write there")


def test_show_unknown_run(tmp_path):
    db = tmp_path / "x.db"
    memsleuth("compare", "--db", str(db), "--alloc", "glibc", "--param", "iterations=1000", "--reps", "1")
    _one_line_error(memsleuth("show", "99", "--db", str(db)), "no run 99")
