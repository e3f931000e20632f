"""`check --try` on a real program: the advice its findings name, measured against it. The
program calls malloc_trim(0) after every request (issue 21's example): glibc's tunables stop the
break's moves but cannot change malloc_trim's madvise calls, and the trial must say so; another
allocator removes the churn. Asserted: counts (deterministic) and effects of 10x and more."""
from __future__ import annotations

import re
import sqlite3

from conftest import fixture, memsleuth, needs_tracepoints


def _row(out: str, name: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(f"{name}: "))


@needs_tracepoints
def test_try_measures_each_candidate_and_never_calls_an_unchanged_count_a_fix(tmp_path):
    db = str(tmp_path / "t.db")
    # a budget that holds every candidate on a busy machine (its default, 20 times the program's time and
    # at least 60 s, left mimalloc out beside two busy loops: the budget's own test is below)
    proc = memsleuth("check", "--try", "--try-rounds", "8", "--try-budget", "900", "--db", db, "--",
                     fixture("plain-trim_per_request"), "1000")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "memsleuth check --try" in out
    trim = _row(out, "trim_threshold=1G")
    # The threshold stops free()'s trimming: the break's moves fall from about 5,000 to a handful.
    before, after = (int(x.replace(",", "")) for x in re.search(r"brk calls ([\d,]+) -> ([\d,]+)", trim).groups())
    assert before > 4000 and after < 100, trim
    # malloc_trim(0) madvises whatever the threshold: where the trial shows the count (when the
    # madvise finding was material in this run), it is unchanged.
    if "madvise calls" in trim:
        assert re.search(r"madvise calls 1,0\d\d -> 1,0\d\d", trim), trim
    mimalloc = _row(out, "mimalloc")
    assert mimalloc.startswith(("mimalloc: helps", "mimalloc: trade-off")), mimalloc
    assert int(re.search(r"time \(cpu\) -(\d+)%", mimalloc).group(1)) >= 50
    # The trial is stored: `show` prints it again.
    shown = memsleuth("show", "2", "--db", db)
    assert shown.returncode == 0 and "Tried advice" in shown.stdout
    # Without --try, the same advice is marked untried, with the command that tries it.
    plain = memsleuth("check", "--db", str(tmp_path / "u.db"), "--", fixture("plain-trim_per_request"), "1000")
    assert "The advice above is untried" in plain.stdout and "memsleuth check --try --" in plain.stdout


def test_try_on_a_clean_program_says_there_is_nothing_to_try(tmp_path):
    proc = memsleuth("check", "--try", "--db", str(tmp_path / "t.db"), "--", "true")
    assert proc.returncode == 0, proc.stderr
    assert "--try: no finding of this run names a setting or an allocator to try" in proc.stdout


def test_try_rounds_below_six_are_refused(tmp_path):
    proc = memsleuth("check", "--try", "--try-rounds", "3", "--db", str(tmp_path / "t.db"), "--", "true")
    assert proc.returncode == 2 and "at least 6" in proc.stderr


def test_try_says_its_plan_first_and_stays_within_its_budget(tmp_path):
    """A budget that holds no candidate's six rounds: said in one line, and no session is run."""
    db = tmp_path / "b.db"
    proc = memsleuth("check", "--try", "--try-budget", "1", "--db", str(db), "--", fixture("plain-steps"), "20")
    assert proc.returncode == 0, proc.stderr
    assert "no candidate fits 1 s" in proc.stderr, proc.stderr
    kinds = [r[0] for r in sqlite3.connect(db).execute("select kind from runs")]
    assert kinds == ["check"], kinds
    assert memsleuth("check", "--try-budget", "60", "--db", str(db), "--", "true").returncode == 2   # needs --try
