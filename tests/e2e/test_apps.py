"""compare --suite apps (issue 46): the real applications of src/memsleuth/measure/apps, installed by
the project's set-up, each run under the allocators with its own figure parsed from its output and
checked by its own script. An application that is not installed is skipped and said so."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import memsleuth
from memsleuth.measure import allocators, apps, native
from memsleuth.measure.apps import sqlite
from memsleuth.records import documents

ROOT = Path(__file__).resolve().parents[2]


def test_every_installed_application_runs_under_each_allocator_with_its_checked_figure(tmp_path):
    js = tmp_path / "apps.json"
    proc = memsleuth("compare", "--db", str(tmp_path / "a.db"), "--suite", "apps", "--alloc", "glibc,mimalloc",
                     "--reps", "1", "--warmup", "0", "--no-reference", "--json", str(js), timeout=900)
    installed = [a.name for a in apps.APPS if not a.missing()]
    if not installed:
        pytest.skip("none of the applications is installed here (make setup installs them as root)")
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(js.read_text())
    assert doc["suite"] == "apps"
    assert [r["run"]["name"] for r in doc["runs"]] == installed
    assert {s["name"] for s in doc["skipped"]} == {a.name for a in apps.APPS if a.missing()}
    for r in doc["runs"]:
        app = next(a for a in apps.APPS if a.name == r["run"]["name"])
        assert r["run"]["spec"]["metric"]["name"] == app.figure
        for c in r["cells"]:
            ok = [s for s in c["samples"] if s["status"] == "ok" and s["round"] >= 0]     # the measured runs
            # --warmup 0 runs no warm-up (round -1; -2 is an explaining run)
            assert not [s for s in c["samples"] if s["round"] == -1 and s["status"] == "ok"], "--warmup 0 runs none"
            assert ok, (app.name, c["label"], [(s["status"], s["detail"]) for s in c["samples"]])
            assert all(s["result"]["metric"] > 0 for s in ok), (app.name, [s["result"] for s in ok])
    assert "Applications" in proc.stdout and "geometric" in proc.stdout


def test_every_program_of_an_application_mallocs_from_the_allocator_its_cell_names(tmp_path):
    """A program that links an allocator of its own (Debian's redis links libjemalloc ahead of libc)
    takes that one's malloc when nothing is preloaded, so glibc's cell would measure another allocator
    under glibc's name. Each application's script is run as an explaining run preloads it (the heap
    accounting in front of the cell's allocator); every process of its tree says which object served
    its malloc (the heap document's malloc_object), and it must be the cell's allocator."""
    installed = [a for a in apps.APPS if not a.missing()]
    if not installed:
        pytest.skip("none of the applications is installed here (make setup installs them as root)")
    cells = [a for a in allocators.available() if a.name in ("glibc", "mimalloc")]
    heap_lib = str(native.native_path("libmsheap.so"))
    for app in installed:
        folder = tmp_path / app.name
        folder.mkdir()
        app.prepare(folder)
        for alloc in cells:
            out = tmp_path / f"{app.name}-{alloc.name}"
            out.mkdir()
            preload = ":".join([heap_lib] + ([alloc.preload] if alloc.preload else []))
            env = {**os.environ, "LD_PRELOAD": preload, "MEMSLEUTH_HEAP_OUT": str(out)}
            done = subprocess.run(app.command(folder), capture_output=True, text=True, env=env, timeout=300)
            assert done.returncode == 0 and app.metric.read(done.stdout) is not None, (app.name, done.stderr[-2000:])
            served = {(d.get("malloc_object"), d["pid"]) for d in documents.run_documents(str(out), "heap")}
            assert served, (app.name, alloc.name)
            wrong = {(obj, pid) for obj, pid in served
                     if not obj or os.path.realpath(obj) != os.path.realpath(alloc.malloc_object)}
            assert not wrong, (app.name, alloc.name, alloc.malloc_object, sorted(wrong, key=str)[:5])


def test_an_application_whose_check_fails_prints_no_figure(tmp_path):
    """sqlite's script checks the counts its data fixes: with keys it did not expect it exits non-zero
    and prints no figure, so the run is an error (launcher.read_metric), never a number."""
    if sqlite.APP.missing():
        pytest.skip("sqlite3 is not installed (make setup installs it as root)")
    sqlite.prepare(tmp_path)
    sql = tmp_path / "load.sql"
    sql.write_text(sql.read_text().replace("printf('key%08d'", "printf('kez%08d'"))
    out = subprocess.run(sqlite.APP.command(tmp_path), capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and sqlite.APP.metric.read(out.stdout) is None, out.stdout


def test_the_set_up_installs_every_applications_package():
    makefile = (ROOT / "Makefile").read_text()
    listed = set(re.findall(r"^\w+_PACKAGES := (.*)$", makefile, re.M) and
                 " ".join(re.findall(r"^\w+_PACKAGES := (.*)$", makefile, re.M)).split())
    assert set(apps.PACKAGES) - {"python3-minimal"} <= listed, set(apps.PACKAGES) - listed
