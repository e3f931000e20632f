"""memsleuth fleet on a real one-machine Slurm cluster (tests/slurm_cluster.py): submit, status,
collect; bad input. Root only: slurmd runs the jobs."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest

import slurm_cluster

REASON = None
if os.geteuid() != 0:
    REASON = "not root: slurmd must run jobs as their users (run `make test` as root, as CI does)"
elif slurm_cluster.missing():
    REASON = "Slurm or munge not installed (" + ", ".join(slurm_cluster.missing()) + "): `make test` as root installs them"
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")

SHORT = ["compare", "--alloc", "glibc", "--param", "ws=400", "--param", "iterations=20000", "--reps", "2",
         "--no-reference"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = slurm_cluster.Cluster(tmp_path_factory.mktemp("slurm")).start()
    yield c
    c.stop()


def ms(cluster, *args, timeout=300):
    return subprocess.run([sys.executable, "-m", "memsleuth", *args], capture_output=True, text=True, timeout=timeout,
                          env={**cluster.env, "COLUMNS": "200", "XDG_CACHE_HOME": str(cluster.root / "cache")})


def test_two_partitions_submit_wait_collect(cluster, tmp_path):
    res, db = tmp_path / "res", tmp_path / "all.db"
    sub = ms(cluster, "fleet", "submit", "--partition", "fast,slow", "--results", str(res), "--time", "00:10:00", *SHORT)
    assert sub.returncode == 0, sub.stderr
    job = json.loads((res / "fleet.json").read_text())["job"]
    assert f"submitted job {job}: 2 task(s)" in sub.stdout
    script = (res / "fleet.sbatch").read_text()
    assert "#SBATCH --array=0-1" in script and "#SBATCH --exclusive" in script and "#SBATCH --time=00:10:00" in script
    col = ms(cluster, "fleet", "collect", job, "--wait", "--timeout", "240", "--db", str(db))
    assert col.returncode == 0, col.stdout + col.stderr
    con = sqlite3.connect(db)
    machines = [json.loads(m) for (m,) in con.execute("SELECT machine FROM runs ORDER BY id")]
    assert sorted(m["label"] for m in machines) == ["fast", "slow"]
    status = ms(cluster, "fleet", "status", job)
    assert status.returncode == 0
    lines = [ln for ln in status.stdout.splitlines() if "COMPLETED" in ln]
    assert len(lines) == 2 and any("fast" in ln for ln in lines) and any("slow" in ln for ln in lines)
    again = ms(cluster, "fleet", "collect", str(res), "--db", str(db))
    assert again.returncode == 0 and "no new runs" in again.stdout
    shown = ms(cluster, "show", "1", "2", "--db", str(db))
    assert shown.returncode == 0 and "fast (run" in shown.stdout and "slow (run" in shown.stdout


def test_a_failed_task_is_recorded_with_its_state_and_log(cluster, tmp_path):
    res, db = tmp_path / "res", tmp_path / "f.db"
    sub = ms(cluster, "fleet", "submit", "--partition", "fast", "--results", str(res), "compare", "--alloc", "glibc",
             "--reps", "1", "--no-reference", "--", "sh", "-c", "echo boom >&2; exit 7")
    assert sub.returncode == 0, sub.stderr
    col = ms(cluster, "fleet", "collect", str(res), "--wait", "--timeout", "240", "--db", str(db))
    assert col.returncode == 0, col.stdout + col.stderr
    assert "Slurm state FAILED" in col.stdout
    row = sqlite3.connect(db).execute("SELECT status, kind, spec, id FROM runs WHERE kind='fleet-task'").fetchone()
    assert row[0] == "failed"
    facts = json.loads(row[2])["facts"]
    assert facts["slurm_state"] == "FAILED" and facts["exit_code"].startswith("3")
    assert "no cell produced a result" in facts["log_tail"]
    shown = ms(cluster, "show", str(row[3]), "--db", str(db))
    assert shown.returncode == 0 and "state FAILED" in shown.stdout and "Log tail" in shown.stdout


@pytest.mark.parametrize("args,message", [
    (["--partition", "fast,nope"], "no Slurm partition 'nope'"),
    (["--partition", "fast", "--sbatch-option=--gres=gpu:9"], "sbatch refused the job"),
])
def test_bad_targets_are_refused_before_anything_runs(cluster, tmp_path, args, message):
    res = tmp_path / "res"
    proc = ms(cluster, "fleet", "submit", *args, "--results", str(res), *SHORT)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not res.exists()
    assert "memsleuth-fleet" not in subprocess.run(["squeue", "-h", "-o", "%j"], env=cluster.env, capture_output=True,
                                                   text=True).stdout


def test_a_task_slurm_kills_is_recorded_and_what_it_stored_kept(cluster, tmp_path):
    """Slurm ending a task early (here scancel; a time limit takes the same path with state TIMEOUT,
    but Slurm's shortest limit is a minute): collect records its state and log tail."""
    import time
    res, db = tmp_path / "res", tmp_path / "k.db"
    sub = ms(cluster, "fleet", "submit", "--partition", "slow", "--results", str(res), "check", "--reps", "3",
             "--no-where", "--", "sleep", "300")
    assert sub.returncode == 0, sub.stderr
    job = json.loads((res / "fleet.json").read_text())["job"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (res / "task-0.db").exists():
        time.sleep(0.5)
    time.sleep(2)
    subprocess.run(["scancel", job], env=cluster.env, check=True)
    col = ms(cluster, "fleet", "collect", job, "--wait", "--timeout", "120", "--db", str(db))
    assert col.returncode == 0, col.stdout + col.stderr
    rows = sqlite3.connect(db).execute("SELECT kind, status, spec FROM runs ORDER BY id").fetchall()
    task = next(json.loads(spec)["facts"] for kind, _, spec in rows if kind == "fleet-task")
    assert task["slurm_state"] == "CANCELLED" and task["partition"] == "slow"
    assert any(kind == "check" for kind, _, _ in rows), "what the task stored before it was killed is kept"
