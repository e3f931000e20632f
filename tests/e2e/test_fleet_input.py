"""fleet's bad input that needs no cluster: no Slurm on the machine, a task command that does not
parse, options fleet sets itself."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest


def ms(*args, path=None):
    env = {**os.environ, "COLUMNS": "200"}
    if path is not None:
        env["PATH"] = path
    return subprocess.run([sys.executable, "-m", "memsleuth", *args], capture_output=True, text=True, timeout=60,
                          env=env)


def test_no_slurm_on_this_machine(tmp_path):
    proc = ms("fleet", "submit", "--partition", "a,b", "--results", str(tmp_path / "r"), "compare", path="/nonexistent")
    assert proc.returncode == 2 and "no Slurm on this machine" in proc.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("args,message", [
    (["--partition", "a", "compare", "--bogus"], "does not parse: unrecognized arguments: --bogus"),
    (["--partition", "a", "compare", "--db", "x.db"], "leave --db out"),
    (["--partition", "a", "history"], "compare, case or check"),
    (["compare"], "needs the target machine types"),
    (["--partition", "a", "--constraint", "x,y", "--nodelist", "n1", "compare"], "as one list"),
    (["--partition", "a", "--db", "file.db", "compare"], "takes a postgresql:// URL"),
    (["--partition", "a", "check"], "check needs the program"),
])
def test_bad_submissions_are_one_line(tmp_path, args, message):
    proc = ms("fleet", "submit", "--results", str(tmp_path / "r"), *args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_status_of_an_unknown_fleet(tmp_path):
    proc = ms("fleet", "status", "424242")
    assert proc.returncode == 2 and "no fleet known" in proc.stderr
