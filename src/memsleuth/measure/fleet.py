"""The fleet: one comparison on several machine types through Slurm (docs/fleet.md).

`submit` writes one sbatch script with a job array, one task per target (a partition, a node
list or a constraint), each on an exclusive node running the whole interleaved comparison there:
pairing by round only means something within one machine. Slurm sets a partition per job, not
per array task, so the array is submitted held, each task's target is set with `scontrol update
JobId=J_i`, and the array released: one job id, one task per machine type.

Each task writes its own SQLite file in the results folder (no two writers on one SQLite file, on
NFS or not), or straight into PostgreSQL when --db is a postgresql:// URL. `collect` merges the
tasks' files into the store (by run UUID: collecting twice adds nothing) and records a task that
Slurm failed or killed as a failed run with its Slurm state and log tail.

Slurm is driven through its commands (sbatch --parsable, scontrol, squeue, sacct), never a Python
binding. Task states come from sacct where accounting is enabled, else from scontrol (jobs are
kept MinJobAge seconds after they end), else from the marker files the task writes itself.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from memsleuth.errors import UsageError

MANIFEST = "fleet.json"
SCRIPT = "fleet.sbatch"
# Task states that are final (Slurm's names).
DONE = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
        "DEADLINE"}
REGISTRY = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "memsleuth" / "fleets"


def cluster_name() -> str:
    """The Slurm cluster's name (scontrol show config: ClusterName), which keys the fleet registry
    with the job id: two clusters number their jobs independently. "default" when it cannot be read."""
    try:
        out = _slurm("scontrol", "show", "config", timeout=20).stdout
    except (UsageError, OSError, subprocess.SubprocessError):
        return "default"
    m = re.search(r"^ClusterName\s*=\s*(\S+)", out, re.M)
    name = m.group(1) if m else "default"
    return name if re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name) else "default"


def _registry(job: str) -> Path:
    return REGISTRY / cluster_name() / job


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise UsageError(f"fleet needs Slurm's {name} on PATH, and it is not there (no Slurm on this machine?)")
    return path


def _slurm(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([_tool(argv[0]), *argv[1:]], capture_output=True, text=True, timeout=timeout)


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "no message"


@dataclass
class Target:
    kind: str      # "partition", "constraint" or "nodelist"
    value: str

    def scontrol_args(self) -> list[str]:
        return [{"partition": "Partition", "constraint": "Features", "nodelist": "ReqNodeList"}[self.kind] + "=" +
                self.value]


def targets_from(partition: str | None, constraint: str | None, nodelist: str | None) -> tuple[list[Target], str | None]:
    """The machine types to run on, and the one partition they share (constraint/nodelist targets)."""
    lists = [(k, v) for k, v in (("constraint", constraint), ("nodelist", nodelist)) if v]
    if len(lists) > 1:
        raise UsageError("give the targets as one list: --partition, --constraint or --nodelist")
    if lists:
        kind, text = lists[0]
        shared = partition
        if shared and "," in shared:
            raise UsageError(f"with --{kind} as the targets, --partition names the one partition they share")
    elif partition:
        kind, text, shared = "partition", partition, None
    else:
        raise UsageError("fleet submit needs the target machine types: --partition P1,P2 (or --constraint / --nodelist)")
    values = [v.strip() for v in (text.split(";") if kind == "nodelist" else text.split(",")) if v.strip()]
    if kind != "nodelist" and len(values) != len(set(values)):
        raise UsageError(f"--{kind} names a target twice")
    for v in values:
        if not re.fullmatch(r"[A-Za-z0-9_.:\[\]\-,&|()!*]+", v):
            raise UsageError(f"bad --{kind} value {v!r}")
    return [Target(kind, v) for v in values], shared


def check_partitions(names: list[str]) -> None:
    """Every named partition exists (sinfo), before anything is submitted."""
    out = _slurm("sinfo", "-h", "-o", "%P")
    if out.returncode != 0:
        raise UsageError(f"sinfo failed: {_first_line(out.stderr)} (is slurmctld reachable?)")
    known = {p.rstrip("*") for p in out.stdout.split()}
    for n in names:
        if n not in known:
            raise UsageError(f"no Slurm partition {n!r} (partitions: {', '.join(sorted(known)) or 'none'})")


def script(targets: list[Target], shared_partition: str | None, memsleuth_argv: list[str], command: list[str] | None,
           results: Path, db_url: str | None, sbatch_options: list[str]) -> str:
    """The sbatch script: a job array, one task per target, each on an exclusive node."""
    lines = ["#!/bin/bash",
             "# Written by `memsleuth fleet submit`: one array task per target machine type, each on an",
             "# exclusive node running the whole interleaved comparison there (docs/fleet.md).",
             "#SBATCH --job-name=memsleuth-fleet",
             f"#SBATCH --array=0-{len(targets) - 1}",
             "#SBATCH --nodes=1",
             "#SBATCH --exclusive"]
    # The results folder is user text: it reaches bash once, shell-quoted, as $RESULTS (never inside
    # double quotes, where $(...) would run), and sbatch's --output as an argument of its own (submit).
    if shared_partition:
        lines.append(f"#SBATCH --partition={shared_partition}")
    elif targets[0].kind == "partition":
        lines.append(f"#SBATCH --partition={targets[0].value}")
    for opt in sbatch_options:
        lines.append(f"#SBATCH {opt}")
    labels = " ".join(shlex.quote(t.value) for t in targets)
    db = shlex.quote(db_url) if db_url else '"$RESULTS/task-$SLURM_ARRAY_TASK_ID.db"'
    cmd = " ".join(shlex.quote(a) for a in memsleuth_argv)
    # The program a compare or check measures comes last, after --db.
    tail = (" -- " + " ".join(shlex.quote(a) for a in command)) if command else ""
    lines += ["set -u",
              f"RESULTS={shlex.quote(str(results))}",
              f"TARGETS=({labels})",
              'LABEL="${TARGETS[$SLURM_ARRAY_TASK_ID]}"',
              'export MEMSLEUTH_MACHINE_LABEL="$LABEL"',
              'echo "$SLURM_JOB_ID ${SLURM_JOB_PARTITION:-} $(hostname)" > "$RESULTS/task-$SLURM_ARRAY_TASK_ID.started"',
              f'{cmd} --db {db}{tail}',
              "rc=$?",
              'echo "$rc" > "$RESULTS/task-$SLURM_ARRAY_TASK_ID.exit"',
              "exit $rc", ""]
    return "\n".join(lines)


def submit(targets: list[Target], shared_partition: str | None, memsleuth_args: list[str], command: list[str] | None,
           results: Path, db_url: str | None, sbatch_options: list[str]) -> dict:
    _tool("sbatch")
    _tool("scontrol")
    parts = [t.value for t in targets if t.kind == "partition"] + ([shared_partition] if shared_partition else [])
    if parts:
        check_partitions(parts)
    if results.exists() and (results / MANIFEST).exists():
        raise UsageError(f"{results} already holds a fleet ({results / MANIFEST}): give another --results folder")
    if any(c in str(results) for c in "%\n\r"):
        # Slurm reads % in --output as a filename pattern; a newline would end a line of the script.
        raise UsageError(f"--results {str(results)!r}: a folder whose path holds % or a newline cannot be given to "
                         "Slurm: choose another")
    created = not results.exists()
    try:
        results.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"{results}: cannot create the results folder: {e.strerror}") from None
    results = results.resolve()

    def undo() -> None:
        """A refused submission leaves nothing behind, not even the folder it made."""
        if created:
            try:
                results.rmdir()
            except OSError:
                pass
    argv = [sys.executable, "-m", "memsleuth", *memsleuth_args]
    text = script(targets, shared_partition, argv, command, results, db_url, sbatch_options)
    tmp = results / f".{SCRIPT}.{os.getpid()}"
    tmp.write_text(text)
    tmp.chmod(0o600)   # it may hold a database URL with its password
    out = _slurm("sbatch", "--parsable", "--hold", f"--output={results}/task-%a.log", str(tmp))
    if out.returncode != 0:
        tmp.unlink()
        undo()
        raise UsageError(f"sbatch refused the job: {_first_line(out.stderr)}")
    job = out.stdout.strip().split(";")[0]
    try:
        for i, t in enumerate(targets):
            if t.kind == "partition" and i == 0 and not shared_partition:
                continue
            up = _slurm("scontrol", "update", f"JobId={job}_{i}", *t.scontrol_args())
            if up.returncode != 0:
                raise UsageError(f"Slurm refused target {t.value!r} for task {i}: {_first_line(up.stderr)}")
        rel = _slurm("scontrol", "release", job)
        if rel.returncode != 0:
            raise UsageError(f"scontrol release {job} failed: {_first_line(rel.stderr)}")
    except BaseException:
        _slurm("scancel", job)
        tmp.unlink(missing_ok=True)
        undo()
        raise
    os.replace(tmp, results / SCRIPT)
    manifest = {"job": job, "targets": [t.__dict__ for t in targets], "shared_partition": shared_partition,
                "results": str(results), "db": _display(db_url) if db_url else None, "argv": memsleuth_args,
                "command": command, "submitted_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    # Private: the task's arguments may hold a database URL (shown here without its password).
    manifest["argv"] = [_display(a) if "postgres" in a.lower() else a for a in memsleuth_args]
    fd = os.open(results / MANIFEST, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(manifest, indent=2) + "\n")
    try:
        entry = _registry(job)
        entry.parent.mkdir(parents=True, exist_ok=True)
        entry.write_text(str(results) + "\n")
    except OSError:
        pass
    return manifest


def _display(url: str) -> str:
    from memsleuth.records.store_pg import display
    return display(url)


def load(job_or_dir: str) -> dict:
    """A fleet's manifest from its job id (registered at submit) or its results folder."""
    p = Path(job_or_dir)
    if not (p / MANIFEST).exists():
        if re.fullmatch(r"\d+", job_or_dir):
            # This cluster's entry; a registry written before entries were kept per cluster has
            # the job id alone.
            for reg in (_registry(job_or_dir), REGISTRY / job_or_dir):
                if reg.is_file():
                    p = Path(reg.read_text().strip())
                    break
        if not (p / MANIFEST).exists():
            raise UsageError(f"{job_or_dir}: no fleet known by that job id or folder (give the --results folder "
                             "fleet submit printed)")
    try:
        m = json.loads((p / MANIFEST).read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"{p / MANIFEST}: cannot read the fleet's manifest: {e}") from None
    why = _manifest_problem(m)
    if why:
        raise UsageError(f"{p / MANIFEST}: not a fleet manifest memsleuth wrote ({why})")
    return m


def _manifest_problem(m) -> str | None:
    """What is wrong with a manifest's shape (the fields status and collect read), or None."""
    if not isinstance(m, dict):
        return f"a JSON {type(m).__name__}, not an object"
    if not isinstance(m.get("job"), str) or not re.fullmatch(r"\d+", m["job"]):
        return "its job id is missing or not a number"
    if not isinstance(m.get("results"), str) or not m["results"]:
        return "its results folder is missing"
    targets = m.get("targets")
    if not isinstance(targets, list) or not targets or not all(
            isinstance(t, dict) and isinstance(t.get("value"), str) and isinstance(t.get("kind"), str) for t in targets):
        return "its targets are missing or malformed"
    if not isinstance(m.get("argv"), list) or not all(isinstance(a, str) for a in m["argv"]):
        return "its task arguments are missing or malformed"
    if m.get("db") is not None and not isinstance(m["db"], str):
        return "its database is malformed"
    return None


@dataclass
class TaskState:
    index: int
    target: str
    state: str            # Slurm's state, or UNKNOWN
    partition: str = ""
    node: str = ""
    exit_code: str = ""
    source: str = ""      # sacct, scontrol, squeue or marker


def states(manifest: dict) -> list[TaskState]:
    job = manifest["job"]
    targets = [t["value"] for t in manifest["targets"]]
    found: dict[int, TaskState] = {}
    acct = _slurm("sacct", "-j", job, "--array", "-n", "-P", "-X", "-o", "JobID,State,ExitCode,Partition,NodeList")
    if acct.returncode == 0 and acct.stdout.strip():
        for line in acct.stdout.strip().splitlines():
            jid, state, code, part, node = (line.split("|") + [""] * 5)[:5]
            m = re.fullmatch(rf"{job}_(\d+)", jid)
            if m and int(m.group(1)) < len(targets):
                i = int(m.group(1))
                found[i] = TaskState(i, targets[i], state.split()[0], part, node, code, "sacct")
    if len(found) < len(targets):
        show = _slurm("scontrol", "show", "job", job, "-o")
        if show.returncode == 0:
            for line in show.stdout.strip().splitlines():
                f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
                if f.get("ArrayJobId") == job and f.get("ArrayTaskId", "").isdigit():
                    i = int(f["ArrayTaskId"])
                    if i < len(targets) and i not in found:
                        found[i] = TaskState(i, targets[i], f.get("JobState", "UNKNOWN"), f.get("Partition", ""),
                                             f.get("NodeList", "") if f.get("NodeList") != "(null)" else "",
                                             f.get("ExitCode", ""), "scontrol")
    results = Path(manifest["results"])
    for i, t in enumerate(targets):
        if i in found:
            continue
        exit_file, started = results / f"task-{i}.exit", results / f"task-{i}.started"
        if exit_file.exists():
            code = exit_file.read_text().strip()
            found[i] = TaskState(i, t, "COMPLETED" if code == "0" else "FAILED", exit_code=f"{code}:0",
                                 node=(started.read_text().split() + ["", "", ""])[2] if started.exists() else "",
                                 source="marker")
        elif started.exists():
            found[i] = TaskState(i, t, "RUNNING?", source="marker")
        else:
            found[i] = TaskState(i, t, "UNKNOWN", source="none")
    return [found[i] for i in range(len(targets))]


def log_tail(manifest: dict, index: int, lines: int = 12) -> str:
    p = Path(manifest["results"]) / f"task-{index}.log"
    try:
        return "\n".join(p.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def wait(manifest: dict, timeout_s: float, every_s: float = 5.0) -> list[TaskState]:
    t0 = time.monotonic()
    while True:
        st = states(manifest)
        if all(s.state in DONE for s in st):
            return st
        if time.monotonic() - t0 > timeout_s:
            return st
        print("memsleuth: fleet " + manifest["job"] + ": " + ", ".join(f"task {s.index} ({s.target}) {s.state}"
                                                                      for s in st), file=sys.stderr, flush=True)
        time.sleep(every_s)


def failed_task_uuid(job: str, index: int) -> str:
    return uuid.uuid5(uuid.NAMESPACE_URL, f"memsleuth-fleet:{job}:{index}").hex
