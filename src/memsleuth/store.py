"""The store: one SQLite file (WAL), runs -> cells -> samples.

Every sample is committed as soon as it exists, so an interrupted run keeps what it finished.
A run records the host and process that writes it: a run left "running" by a process that is
gone (killed, or stopped by a full disk) reads as interrupted, with what it kept.

Failure behaviour (README): a file that is not a memsleuth store (another program's SQLite, a
damaged page) is refused before anything is written; reading commands open the store read-only
and never change it; a failed write (disk full) ends the command with exit code 4 and keeps
every sample committed before it.
"""
from __future__ import annotations

import json
import os
import socket
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from memsleuth.errors import StoreError, UsageError
from memsleuth.evidence import Sample
from memsleuth.model import AllocatorInfo, MachineInfo, RunSpec, cell_label, contender

SCHEMA_VERSION = 2
WARMUP_ROUND = -1
# One more run per cell, after the measured ones, that records the syscalls' arguments (ms-run
# --syscall-args): recording costs every such call a sample, so no measured run carries it.
EXPLAIN_ROUND = -2
# The position of the reference cell (plan.reference_cell): loaded as StoredRun.reference, never
# among the compared cells.
REFERENCE_POSITION = -1
APP = "memsleuth"
_TABLES = {"meta", "runs", "cells", "samples"}
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    created_at TEXT NOT NULL,
    finished_at TEXT,
    status TEXT NOT NULL,            -- running, complete, interrupted, failed
    kind TEXT NOT NULL,              -- workload, command, case, check
    name TEXT NOT NULL,              -- workload name or program
    argv TEXT NOT NULL,              -- JSON list: the memsleuth command line
    spec TEXT NOT NULL,              -- JSON: model.RunSpec
    machine TEXT NOT NULL,           -- JSON: model.MachineInfo
    version TEXT NOT NULL,
    owner_host TEXT,                 -- the host and process writing a running run
    owner_pid INTEGER,
    owner_start TEXT                 -- that process's start time (pids are reused)
);
CREATE TABLE IF NOT EXISTS cells (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    position INTEGER NOT NULL,
    allocator TEXT NOT NULL,         -- JSON: model.AllocatorInfo
    params TEXT NOT NULL,            -- JSON object
    env TEXT NOT NULL,               -- JSON object
    command TEXT NOT NULL,           -- JSON list
    where_sites TEXT                 -- JSON: call sites from a perf run (where.py), or NULL
);
CREATE TABLE IF NOT EXISTS samples (
    id INTEGER PRIMARY KEY,
    cell_id INTEGER NOT NULL REFERENCES cells(id),
    round INTEGER NOT NULL,          -- interleaving round; -1 warm-up, -2 the explaining run (EXPLAIN_ROUND)
    warmup INTEGER NOT NULL,
    status TEXT NOT NULL,
    created_at TEXT NOT NULL,
    evidence TEXT NOT NULL           -- JSON: ms-run's document plus the workload's result
);
CREATE INDEX IF NOT EXISTS samples_cell ON samples(cell_id);
CREATE INDEX IF NOT EXISTS cells_run ON cells(run_id);
"""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _process_start(pid: int) -> str | None:
    """Start time of a process in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()[19]


@dataclass
class StoredCell:
    id: int
    position: int
    allocator: AllocatorInfo
    params: dict
    env: dict
    command: list
    samples: list[tuple[int, bool, Sample]]  # (round, warmup, sample)
    where: dict | None = None                 # call sites (where.py), when recorded

    @property
    def label(self) -> str:
        return cell_label(self.allocator.name, self.params)

    @property
    def contender(self) -> str:
        return contender(self.allocator.name, self.params)

    def measured(self) -> list[tuple[int, Sample]]:
        return [(r, s) for r, w, s in self.samples if not w]

    @property
    def explain_samples(self) -> list[Sample]:
        """The explaining run(s): not measured, they carry the syscalls' arguments."""
        return [s for r, w, s in self.samples if r == EXPLAIN_ROUND and s.ok]


@dataclass
class StoredRun:
    id: int
    created_at: str
    finished_at: str | None
    status: str
    kind: str
    name: str
    argv: list
    spec: RunSpec
    machine: MachineInfo
    version: str
    cells: list[StoredCell]
    reference: StoredCell | None = None       # the reference cell (plan.reference_cell), not compared


@dataclass
class RunSummary:
    """One line of `memsleuth history`."""
    id: int
    created_at: str
    status: str
    kind: str
    name: str
    argv: list
    machine: MachineInfo
    cells: int
    samples: int


# Stores open in this process, by (device, inode). Closing any file descriptor of a file drops
# every POSIX lock this process holds on it, including SQLite's on an open connection: a compare
# writing the store at that moment then takes itself for the last user and removes the -shm file
# under the open reader, which reads a torn database ("malformed", seen in bench/gate_power.py).
# So the file's header is read directly only while no connection of this process has it open.
_OPEN: dict[tuple[int, int], int] = {}


def _file_key(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


class Store:
    """`readonly` opens an existing store for reading only: nothing is created or changed."""

    def __init__(self, path: str | os.PathLike, *, readonly: bool = False):
        self.path = Path(path)
        self.readonly = readonly
        self._key = None
        self._check_path()
        try:
            self.db = self._connect()
            self._key = _file_key(self.path)
            if self._key is not None:
                _OPEN[self._key] = _OPEN.get(self._key, 0) + 1
            self._check_is_ours()
            if not readonly:
                self._init_schema()
            self._check_schema()
        except sqlite3.DatabaseError as e:
            raise StoreError(self._explain(e)) from None

    # ---- opening ----
    def _check_path(self) -> None:
        p = self.path
        if p.exists():
            if p.is_dir():
                raise UsageError(f"{p}: is a directory, not a database file")
            if _OPEN.get(_file_key(p)):
                head = b"SQLite format 3\x00"   # open in this process already: see _OPEN
            else:
                try:
                    with open(p, "rb") as f:
                        head = f.read(16)
                except OSError as e:
                    raise StoreError(f"{p}: cannot read it: {e.strerror}") from None
            if head and head != b"SQLite format 3\x00":
                raise UsageError(f"{p}: not an SQLite database (damaged, or some other file)")
            if not self.readonly and not os.access(p, os.W_OK):
                raise StoreError(f"{p}: database is not writable (reading commands like show and history can "
                                 "still read it)")
        elif self.readonly:
            raise UsageError(f"{p}: no such database (run `memsleuth compare` first, or give --db FILE)")
        else:
            parent = p.parent if str(p.parent) else Path(".")
            if not parent.is_dir():
                raise UsageError(f"{p}: cannot create the database: {parent} is not a directory")
            if not os.access(parent, os.W_OK):
                raise StoreError(f"{p}: cannot create the database: {parent} is not writable")

    def _connect(self) -> sqlite3.Connection:
        if not self.readonly:
            db = sqlite3.connect(str(self.path), timeout=30)
            db.execute("PRAGMA journal_mode=WAL")
            # In WAL mode NORMAL still survives a crash of memsleuth (only a power loss can drop
            # the last commits), and saves an fsync per sample.
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA foreign_keys=ON")
            return db
        parent = self.path.parent if str(self.path.parent) else Path(".")
        if os.access(self.path, os.W_OK) and os.access(parent, os.W_OK):
            # A store we could write: an ordinary connection that refuses writes. It shares the WAL
            # with a compare writing the store right now, so it always reads a consistent state.
            db = sqlite3.connect(str(self.path), timeout=30)
            db.execute("PRAGMA query_only=ON")
            return db
        uri = self.path.resolve().as_uri()
        try:
            db = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=30)
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return db
        except sqlite3.OperationalError:
            # A WAL database in a folder we cannot write (another user's): read it as it is on
            # disk. Safe while no one writes it, which is the case for a store we may not write
            # (immutable=1 with a writer active reads a torn state: "database disk image is
            # malformed", seen with a reader held open across compares, so it is never used on a
            # store we could write).
            db = sqlite3.connect(f"{uri}?immutable=1", uri=True, timeout=30)
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return db

    def _check_is_ours(self) -> None:
        tables = {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            if self.readonly:
                raise UsageError(f"{self.path}: an empty database, not a memsleuth store")
            return
        app = None
        if "meta" in tables:
            row = self.db.execute("SELECT value FROM meta WHERE key='app'").fetchone()
            ver = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            app = row[0] if row else (APP if ver and _TABLES <= tables else None)
        if app != APP:
            shown = ", ".join(sorted(tables)[:6])
            raise UsageError(f"{self.path}: an SQLite database of another program (tables: {shown}), not a memsleuth "
                             "store; give another --db")
        if not self.readonly:
            bad = self.db.execute("PRAGMA quick_check").fetchone()[0]
            if bad != "ok":
                raise StoreError(f"{self.path}: the database is damaged ({bad}); nothing was written to it. Recover "
                                 "what it holds with `sqlite3 FILE .recover`, or give another --db")

    def _init_schema(self) -> None:
        self.db.executescript(_SCHEMA)
        cols = {r[1] for r in self.db.execute("PRAGMA table_info(runs)")}
        for col in ("owner_host", "owner_pid", "owner_start"):   # schema 1 -> 2
            if col not in cols:
                self.db.execute(f"ALTER TABLE runs ADD COLUMN {col} {'INTEGER' if col == 'owner_pid' else 'TEXT'}")
        if "where_sites" not in {r[1] for r in self.db.execute("PRAGMA table_info(cells)")}:
            self.db.execute("ALTER TABLE cells ADD COLUMN where_sites TEXT")
        self.db.execute("INSERT OR IGNORE INTO meta VALUES ('app', ?)", (APP,))
        self.db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row and int(row[0]) < SCHEMA_VERSION:
            self.db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))
        self.db.commit()

    def _check_schema(self) -> None:
        row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() \
            if self._has_table("meta") else None
        if row and int(row[0]) > SCHEMA_VERSION:
            raise UsageError(f"{self.path}: made by a newer memsleuth (schema {row[0]}); upgrade memsleuth")

    def _has_table(self, name: str) -> bool:
        return self.db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone() is not None

    def _explain(self, e: sqlite3.DatabaseError) -> str:
        text = str(e)
        if "full" in text:
            return f"{self.path}: cannot write: the disk is full ({text}); the runs stored before are kept"
        if "malformed" in text or "corrupt" in text or "not a database" in text:
            return (f"{self.path}: the database is damaged ({text}). Recover what it holds with "
                    "`sqlite3 FILE .recover`, or give another --db")
        if "readonly" in text or "read-only" in text:
            return f"{self.path}: cannot write: the database is read-only ({text})"
        return f"{self.path}: database error: {text}"

    def _do(self, fn):
        """Runs a database operation; a failure becomes a StoreError that says what to do."""
        try:
            return fn()
        except sqlite3.DatabaseError as e:
            try:
                self.db.rollback()
            except sqlite3.DatabaseError:
                pass
            raise StoreError(self._explain(e)) from None

    def close(self) -> None:
        self.db.close()
        if self._key is not None and _OPEN.get(self._key):
            _OPEN[self._key] -= 1
        self._key = None

    def __del__(self) -> None:
        # The connection goes with the Store: one left open by a forgotten Store would lose its
        # locks the next time this process reads the file's header (see _OPEN).
        if getattr(self, "db", None) is not None:
            try:
                self.close()
            except Exception:
                pass

    # ---- writing ----
    def begin_run(self, *, kind: str, name: str, argv: list[str], spec: RunSpec, machine: MachineInfo,
                  version: str) -> int:
        def go():
            cur = self.db.execute(
                "INSERT INTO runs (created_at, status, kind, name, argv, spec, machine, version, owner_host, owner_pid, "
                "owner_start) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (_now(), "running", kind, name, json.dumps(argv), json.dumps(spec.to_dict()),
                 json.dumps(machine.to_dict()), version, socket.gethostname(), os.getpid(), _process_start(os.getpid())))
            self.db.commit()
            return int(cur.lastrowid)
        return self._do(go)

    def add_cell(self, run_id: int, position: int, *, allocator: AllocatorInfo, params: dict, env: dict,
                 command: list) -> int:
        def go():
            cur = self.db.execute(
                "INSERT INTO cells (run_id, position, allocator, params, env, command) VALUES (?,?,?,?,?,?)",
                (run_id, position, json.dumps(allocator.to_dict()), json.dumps(params), json.dumps(env),
                 json.dumps(command)))
            self.db.commit()
            return int(cur.lastrowid)
        return self._do(go)

    def add_sample(self, cell_id: int, round_: int, warmup: bool, sample: Sample) -> None:
        evidence = dict(sample.raw)
        evidence["result"] = sample.result

        def go():
            self.db.execute(
                "INSERT INTO samples (cell_id, round, warmup, status, created_at, evidence) VALUES (?,?,?,?,?,?)",
                (cell_id, round_, int(warmup), sample.status, _now(), json.dumps(evidence)))
            self.db.commit()
        self._do(go)

    def set_where(self, cell_id: int, where: dict) -> None:
        def go():
            self.db.execute("UPDATE cells SET where_sites=? WHERE id=?", (json.dumps(where), cell_id))
            self.db.commit()
        self._do(go)

    def finish_run(self, run_id: int, status: str, machine_update: dict | None = None) -> None:
        """Ends a run; machine_update adds what is only known at the end (the load average then)."""
        def go():
            if machine_update:
                row = self.db.execute("SELECT machine FROM runs WHERE id=?", (run_id,)).fetchone()
                machine = {**json.loads(row[0]), **machine_update}
                self.db.execute("UPDATE runs SET machine=? WHERE id=?", (json.dumps(machine), run_id))
            self.db.execute("UPDATE runs SET status=?, finished_at=?, owner_pid=NULL WHERE id=?",
                            (status, _now(), run_id))
            self.db.commit()
        self._do(go)

    # ---- reading ----
    def _status(self, status: str, host: str | None, pid: int | None, start: str | None) -> str:
        """A run marked running whose process is gone reads as interrupted."""
        if status != "running" or pid is None:
            return status
        if host and host != socket.gethostname():
            return f"running (on {host})"
        if _process_start(pid) is None or (start is not None and _process_start(pid) != start):
            return "interrupted"
        return status

    def list_runs(self) -> list[RunSummary]:
        """One summary per run, oldest first: what `memsleuth history` prints."""
        def go():
            return self.db.execute(
                "SELECT r.id, r.created_at, r.status, r.kind, r.name, r.argv, r.machine, r.owner_host, r.owner_pid, "
                "r.owner_start, (SELECT count(*) FROM cells c WHERE c.run_id = r.id), "
                "(SELECT count(*) FROM samples s JOIN cells c ON c.id = s.cell_id WHERE c.run_id = r.id) "
                "FROM runs r ORDER BY r.id").fetchall()
        out = []
        for rid, created, status, kind, name, argv, machine, host, pid, start, ncells, nsamples in self._do(go):
            out.append(RunSummary(rid, created, self._status(status, host, pid, start), kind, name, json.loads(argv),
                                  MachineInfo.from_dict(json.loads(machine)), ncells, nsamples))
        return out

    def latest_run_id(self) -> int | None:
        row = self._do(lambda: self.db.execute("SELECT max(id) FROM runs").fetchone())
        return row[0] if row and row[0] is not None else None

    def run_ids(self) -> list[int]:
        return [r[0] for r in self._do(lambda: self.db.execute("SELECT id FROM runs ORDER BY id").fetchall())]

    def load_run(self, run_id: int | None = None) -> StoredRun:
        if run_id is None:
            run_id = self.latest_run_id()
            if run_id is None:
                raise UsageError(f"{self.path}: no runs stored yet (run `memsleuth compare` first)")
        row = self._do(lambda: self.db.execute(
            "SELECT id, created_at, finished_at, status, kind, name, argv, spec, machine, version, owner_host, "
            "owner_pid, owner_start FROM runs WHERE id=?", (run_id,)).fetchone())
        if row is None:
            raise UsageError(f"{self.path}: no run {run_id} (runs: {', '.join(map(str, self.run_ids())) or 'none'})")

        def cells():
            out = []
            has_where = "where_sites" in {r[1] for r in self.db.execute("PRAGMA table_info(cells)")}
            for cid, pos, alloc, params, env, command, where in self.db.execute(
                    "SELECT id, position, allocator, params, env, command, "
                    f"{'where_sites' if has_where else 'NULL'} FROM cells WHERE run_id=? ORDER BY position",
                    (run_id,)).fetchall():
                samples = []
                for rnd, warm, ev in self.db.execute(
                        "SELECT round, warmup, evidence FROM samples WHERE cell_id=? ORDER BY id", (cid,)):
                    doc = json.loads(ev)
                    samples.append((rnd, bool(warm), Sample.from_msrun(doc, doc.get("result"))))
                out.append(StoredCell(cid, pos, AllocatorInfo.from_dict(json.loads(alloc)), json.loads(params),
                                      json.loads(env), json.loads(command), samples,
                                      json.loads(where) if where else None))
            return out
        stored = self._do(cells)
        reference = next((c for c in stored if c.position == REFERENCE_POSITION), None)
        return StoredRun(row[0], row[1], row[2], self._status(row[3], row[10], row[11], row[12]), row[4], row[5],
                         json.loads(row[6]), RunSpec.from_dict(json.loads(row[7])),
                         MachineInfo.from_dict(json.loads(row[8])), row[9],
                         [c for c in stored if c.position != REFERENCE_POSITION], reference)
