"""Issue 18: each workload's parameters are declared twice, in its Python schema (what memsleuth
validates and sweeps) and in its C program's options (what the program parses). This asks every
program about every declared parameter with a value it must refuse, before it does any work: the
program must know the option, accept at least the schema's range, and offer every choice the
schema offers; an option the program does not know is refused as unknown."""
from __future__ import annotations

import re
import subprocess

import pytest

from memsleuth.measure import native
from memsleuth.measure.workloads import WORKLOADS

BAD = "not-a-value"
RANGE = re.compile(r"--(?P<name>[\w-]+) must be an integer in \[(?P<lo>\d+), (?P<hi>\d+)\]")
CHOICES = re.compile(r"--(?P<name>[\w-]+) must be one of (?P<choices>.*?), got")

CASES = [(w.name, p) for w in WORKLOADS.values() for p in w.params]


def refuse(workload: str, option: str) -> str:
    prog = str(native.native_path(WORKLOADS[workload].program))
    proc = subprocess.run([prog, option], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2, (workload, option, proc.returncode, proc.stderr)
    return proc.stderr


@pytest.mark.parametrize("workload,param", CASES, ids=[f"{w}:{p.name}" for w, p in CASES])
def test_the_program_knows_each_declared_parameter_as_declared(workload, param):
    err = refuse(workload, f"--{param.name}={BAD}")
    assert "unknown argument" not in err, f"{workload}'s program has no --{param.name}: {err}"
    assert f"--{param.name}" in err, err
    if param.kind in ("choice", "choices"):
        m = CHOICES.search(err)
        assert m, err
        # every choice memsleuth offers; a program may have more of its own (cache-flush's detect)
        assert set(param.choices) <= set(m.group("choices").split()), (param.choices, err)
    elif param.kind in ("int", "size"):
        m = RANGE.search(err)
        assert m, err
        # memsleuth validates first, so its range must lie within what the program accepts
        assert int(m.group("lo")) <= param.minimum and param.maximum <= int(m.group("hi")), (param, err)


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_an_option_the_program_does_not_know_is_refused(workload):
    assert "unknown argument" in refuse(workload, "--no-such-parameter=1")
