"""The store: one SQLite file (WAL) or a PostgreSQL database (`--db postgresql://...`), runs ->
cells -> samples, the same tables and the same queries for both (store_pg.py adapts the few
differences: placeholders, DDL, introspection).

Every sample is committed as soon as it exists, so an interrupted run keeps what it finished.
A run records the host, system and process that writes it, and the writer's heartbeat: a run left
"running" by a process that is gone (killed, or stopped by a full disk) reads as interrupted, with
what it kept, on every host: by its process where that pid means something (the same boot and PID
namespace), by a heartbeat older than STALE_S elsewhere (`judge_status`).

Failure behaviour (docs/usage.md): a file that is not a memsleuth store (another program's SQLite, a
damaged page) is refused before anything is written; reading commands open the store read-only
and never change it; a failed write (disk full) ends the command with exit code 4 and keeps
every sample committed before it.
"""
from __future__ import annotations

import functools
import json
import os
import socket
import sqlite3
import threading
import uuid
from datetime import datetime, timezone
from pathlib import Path

from memsleuth.records import proc, schema
from memsleuth.errors import StoreError, UsageError
from memsleuth.textsafe import clean_bytes
from memsleuth.records.evidence import Sample
from memsleuth.records.sites import CallSites
from memsleuth.records.model import AllocatorInfo, MachineInfo, RunSpec
from memsleuth.records.stored import REFERENCE_POSITION, RunSummary, StoredCell, StoredRun

# 3: runs.uuid (merge across stores is by it). 4: runs.owner_system and runs.heartbeat_at (a run's
# liveness judged alike on every host).
SCHEMA_VERSION = 4
# The columns added to runs since schema 1, in order, each TEXT but owner_pid.
_ADDED_RUN_COLUMNS = ("owner_host", "owner_pid", "owner_start", "uuid", "owner_system", "heartbeat_at")
# The writer refreshes heartbeat_at every HEARTBEAT_S; from a host where the writer's pid means
# nothing, a run whose last sign of life (heartbeat, else its last sample, else its start) is older
# than STALE_S reads as interrupted. Twelve missed beats: a writer starved on a busy machine or a
# store locked for a while is not taken for dead; hosts' clocks must agree within about that.
HEARTBEAT_S = 5.0
STALE_S = 60.0
# Linux's PF_EXITING (include/linux/sched.h): the process is past its last instruction, tearing down.
_PF_EXITING = 0x4
APP = "memsleuth"
_TABLES = {"meta", "runs", "cells", "samples"}
_SCHEMA = schema.ddl("sqlite")
# Created after the schema-2 -> 3 migration has added the column to an older store's runs.
_UUID_INDEX = "CREATE UNIQUE INDEX IF NOT EXISTS runs_uuid ON runs(uuid)"


def legacy_uuid(run_id: int, created_at: str, argv: str, machine: str) -> str:
    """The identity of a run stored before runs had one (schema < 3): derived from what the row
    holds, so the same old store read twice, or migrated, gives the same identity (a merge of it
    stays idempotent)."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"memsleuth-run:{run_id}|{created_at}|{argv}|{machine}").hex


def is_url(db) -> bool:
    """A PostgreSQL URL rather than a file path."""
    return str(db).startswith(("postgresql://", "postgres://"))


def _db_errors() -> tuple[type[BaseException], ...]:
    try:
        import psycopg
        return (sqlite3.DatabaseError, psycopg.Error)
    except ImportError:
        return (sqlite3.DatabaseError,)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _process_stat(pid: int) -> tuple[str, str, int] | None:
    """(start time in clock ticks since boot, state letter, flags) of a process from /proc/PID/stat
    (fields 22, 3 and 9), or None when there is no such process."""
    fields = proc.stat_fields(pid)
    if fields is None or len(fields) < 20:
        return None
    return fields[19], fields[0], int(fields[6])


def _process_start(pid: int) -> str | None:
    stat = _process_stat(pid)
    return stat[0] if stat else None


@functools.cache
def system_identity() -> str:
    """What a pid is relative to: this boot of the kernel and this PID namespace. The same host
    name on another boot (a reboot) or in another container gives pids that mean something else."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = "?"
    try:
        ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        ns = "?"
    return f"{boot} {ns}"


def _age_s(stamp: str | None, now: datetime) -> float | None:
    try:
        return (now - datetime.fromisoformat(stamp)).total_seconds() if stamp else None
    except (TypeError, ValueError):
        return None


def judge_status(status: str, *, host: str | None, pid: int | None, start: str | None, system: str | None,
                 last_sign: str | None, here_host: str, here_system: str,
                 process: tuple[str, str, int] | None, now: datetime) -> str:
    """What a stored run's status reads as, from the facts any host has. A run marked running:
    - where its writer's pid means something (this host name, and this boot and PID namespace where
      the run recorded them): running while that process lives; "running (its memsleuth is gone;
      ending)" while it is exiting; interrupted once it is gone, a zombie, or another process;
    - anywhere else: "running (on HOST)" while its last sign of life (`last_sign`: the heartbeat,
      else the last sample, else its start) is under STALE_S old; interrupted after.
    `process` is _process_stat(pid) read on this host."""
    if status != "running" or pid is None:
        return status
    if host == here_host and (system is None or system == here_system):
        if process is None or (start is not None and process[0] != start) or process[1] in "ZXx":
            return "interrupted"
        if process[2] & _PF_EXITING:
            return "running (its memsleuth is gone; ending)"
        return "running"
    age = _age_s(last_sign, now)
    if age is not None and age > STALE_S:
        return "interrupted"
    return f"running (on {host})" if host else "running"


class _Heartbeat:
    """A daemon thread that writes the run's heartbeat_at every HEARTBEAT_S on a connection of its
    own, until stopped (the run finished) or the process ends (then the heartbeat ages)."""

    def __init__(self, connect, run_id: int):
        self._connect, self._run_id = connect, run_id
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="memsleuth-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        db = None
        while not self._stop.wait(HEARTBEAT_S):
            try:
                db = db or self._connect()
                db.execute("UPDATE runs SET heartbeat_at=? WHERE id=? AND status='running'", (_now(), self._run_id))
                db.commit()
            except Exception:    # a store busy or gone for a moment: the next beat tries again
                try:
                    if db is not None:
                        db.rollback()
                except Exception:
                    db = None
        if db is not None:
            try:
                db.close()
            except Exception:
                pass

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


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
        self.readonly = readonly
        self._key = None
        self._heartbeats: dict[int, _Heartbeat] = {}
        self.pg = is_url(path)
        if self.pg:
            from memsleuth.records import store_pg
            self.url = str(path)
            self.path = store_pg.display(self.url)   # the URL without its password, for messages
            self.db = store_pg.connect(self.url, readonly=readonly)
        else:
            self.path = Path(path)
            self._check_path()
        try:
            if not self.pg:
                self.db = self._connect()
                self._key = _file_key(self.path)
                if self._key is not None:
                    _OPEN[self._key] = _OPEN.get(self._key, 0) + 1
            self._check_is_ours()
            if not readonly:
                if not self.pg:
                    self._set_up_writer()
                self._init_schema()
            self._check_schema()
        except _db_errors() as e:
            raise StoreError(self._explain(e)) from None

    # ---- opening ----
    def _check_path(self) -> None:
        p = self.path
        if p.exists():
            if p.is_dir():
                raise UsageError(f"{p}: is a directory, not a database file")
            if not p.is_file():   # opening a FIFO would hang; a device is no database
                raise UsageError(f"{p}: not a regular file (a FIFO, a device or a socket), not a database file")
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
            # WAL is switched on only once the file is known to be ours (_set_up_writer): refusing
            # another program's database must leave it byte for byte as it was.
            return sqlite3.connect(str(self.path), timeout=30)
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

    def _set_up_writer(self) -> None:
        self.db.execute("PRAGMA journal_mode=WAL")
        # In WAL mode NORMAL still survives a crash of memsleuth (only a power loss can drop the
        # last commits), and saves an fsync per sample.
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA foreign_keys=ON")

    def _tables(self) -> set[str]:
        if self.pg:
            return {r[0] for r in self.db.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")}
        return {r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}

    def _columns(self, table: str) -> set[str]:
        if self.pg:
            return {r[0] for r in self.db.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
                "AND table_name = ?", (table,))}
        return {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}

    def _check_is_ours(self) -> None:
        tables = self._tables()
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
            raise UsageError(f"{self.path}: a database of another program (tables: {shown}), not a memsleuth "
                             "store; give another --db")
        if not self.readonly and not self.pg:
            bad = self.db.execute("PRAGMA quick_check").fetchone()[0]
            if bad != "ok":
                raise StoreError(f"{self.path}: the database is damaged ({bad}); nothing was written to it. Recover "
                                 "what it holds with `sqlite3 FILE .recover`, or give another --db")

    def _schema_current(self) -> bool:
        """Whether the schema is already this memsleuth's: then opening writes nothing to it (no DDL),
        so a role with only SELECT, INSERT and UPDATE on the tables can use a store its owner made."""
        if not _TABLES <= self._tables():
            return False
        if not set(_ADDED_RUN_COLUMNS) <= self._columns("runs") or \
                "where_sites" not in self._columns("cells"):
            return False
        row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if not row or _schema_number(row[0], self.path) != SCHEMA_VERSION:
            return False
        app = self.db.execute("SELECT value FROM meta WHERE key='app'").fetchone()
        return bool(app) and self.db.execute("SELECT count(*) FROM runs WHERE uuid IS NULL").fetchone()[0] == 0

    def _init_schema(self) -> None:
        if self._schema_current():
            return
        if self.pg:
            self.db.executescript(schema.ddl("postgresql"))
        else:
            self.db.executescript(_SCHEMA)
        cols = self._columns("runs")
        for col in _ADDED_RUN_COLUMNS:   # schema 1 -> 2 -> 3 -> 4
            if col not in cols:
                self.db.execute(f"ALTER TABLE runs ADD COLUMN {col} {'INTEGER' if col == 'owner_pid' else 'TEXT'}")
        if "where_sites" not in self._columns("cells"):
            self.db.execute("ALTER TABLE cells ADD COLUMN where_sites TEXT")
        # Runs stored before schema 3 get their identity now, once.
        for rid, created, argv, machine in self.db.execute(
                "SELECT id, created_at, argv, machine FROM runs WHERE uuid IS NULL").fetchall():
            self.db.execute("UPDATE runs SET uuid=? WHERE id=?", (legacy_uuid(rid, created, argv, machine), rid))
        self.db.execute(_UUID_INDEX)
        self.db.execute("INSERT INTO meta VALUES ('app', ?) ON CONFLICT (key) DO NOTHING", (APP,))
        self.db.execute("INSERT INTO meta VALUES ('schema_version', ?) ON CONFLICT (key) DO NOTHING",
                        (str(SCHEMA_VERSION),))
        row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row and _schema_number(row[0], self.path) < SCHEMA_VERSION:
            self.db.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))
        self.db.commit()

    def _check_schema(self) -> None:
        row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() \
            if self._has_table("meta") else None
        if row and _schema_number(row[0], self.path) > SCHEMA_VERSION:
            raise UsageError(f"{self.path}: made by a newer memsleuth (schema {row[0]}); upgrade memsleuth")

    def _has_table(self, name: str) -> bool:
        return name in self._tables()

    def _explain(self, e: BaseException) -> str:
        text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if self.pg:
            return f"{self.path}: database error: {text}"
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
        except _db_errors() as e:
            try:
                self.db.rollback()
            except _db_errors():
                pass
            raise StoreError(self._explain(e)) from None

    def close(self) -> None:
        for beat in self._heartbeats.values():
            beat.stop()
        self._heartbeats.clear()
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
                  version: str, run_uuid: str | None = None) -> int:
        def go():
            cur = self.db.execute(
                "INSERT INTO runs (created_at, status, kind, name, argv, spec, machine, version, owner_host, owner_pid, "
                "owner_start, uuid, owner_system, heartbeat_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING id",
                (now, "running", kind, clean_bytes(name), json.dumps(argv), json.dumps(spec.to_dict()),
                 json.dumps(machine.to_dict()), version, socket.gethostname(), os.getpid(), _process_start(os.getpid()),
                 run_uuid or uuid.uuid4().hex, system_identity(), now))
            rid = int(cur.fetchone()[0])
            self.db.commit()
            return rid
        now = _now()
        rid = self._do(go)
        self._heartbeats[rid] = _Heartbeat(self._second_connection, rid)
        return rid

    def _second_connection(self):
        """A connection of its own to the same store (the heartbeat's thread)."""
        if self.pg:
            from memsleuth.records import store_pg
            return store_pg.connect(self.url, readonly=False)
        return sqlite3.connect(str(self.path), timeout=30)

    def add_cell(self, run_id: int, position: int, *, allocator: AllocatorInfo, params: dict, env: dict,
                 command: list) -> int:
        def go():
            cur = self.db.execute(
                "INSERT INTO cells (run_id, position, allocator, params, env, command) VALUES (?,?,?,?,?,?) RETURNING id",
                (run_id, position, json.dumps(allocator.to_dict()), json.dumps(params), json.dumps(env),
                 json.dumps(command)))
            cid = int(cur.fetchone()[0])
            self.db.commit()
            return cid
        return self._do(go)

    def add_sample(self, cell_id: int, round_: int, warmup: bool, sample: Sample) -> None:
        evidence = dict(sample.raw)
        evidence["result"] = sample.result
        evidence.pop("where", None)      # the cell's call sites (set_where), not the sample's

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

    def finish_run(self, run_id: int, status: str, machine_update: dict | None = None,
                   facts: dict | None = None) -> None:
        """Ends a run; machine_update adds what is only known at the end about the machine (the load
        average then), `facts` what is known of the run (the time each phase of it took)."""
        if (beat := self._heartbeats.pop(run_id, None)) is not None:
            beat.stop()

        def go():
            if machine_update:
                row = self.db.execute("SELECT machine FROM runs WHERE id=?", (run_id,)).fetchone()
                machine = {**json.loads(row[0]), **machine_update}
                self.db.execute("UPDATE runs SET machine=? WHERE id=?", (json.dumps(machine), run_id))
            if facts:
                row = self.db.execute("SELECT spec FROM runs WHERE id=?", (run_id,)).fetchone()
                spec = json.loads(row[0])
                spec["facts"] = {**(spec.get("facts") or {}), **facts}
                self.db.execute("UPDATE runs SET spec=? WHERE id=?", (json.dumps(spec), run_id))
            self.db.execute("UPDATE runs SET status=?, finished_at=?, owner_pid=NULL WHERE id=?",
                            (status, _now(), run_id))
            self.db.commit()
        self._do(go)

    # ---- merging ----
    RUN_COLUMNS = ("created_at", "finished_at", "status", "kind", "name", "argv", "spec", "machine", "version",
                   "owner_host", "owner_pid", "owner_start", "owner_system", "heartbeat_at")
    CELL_COLUMNS = ("position", "allocator", "params", "env", "command", "where_sites")
    SAMPLE_COLUMNS = ("round", "warmup", "status", "created_at", "evidence")

    def run_rows(self, run_id: int) -> dict:
        """A run as its raw rows (no ids): what merge copies into another store."""
        def go():
            cols = self._columns("runs")
            sel = [c if c in cols else "NULL" for c in self.RUN_COLUMNS]
            row = self.db.execute(f"SELECT {', '.join(sel)}, {'uuid' if 'uuid' in cols else 'NULL'}, id "
                                  "FROM runs WHERE id=?", (run_id,)).fetchone()
            run = dict(zip(self.RUN_COLUMNS, row[:-2]))
            run["uuid"] = row[-2] or legacy_uuid(row[-1], run["created_at"], run["argv"], run["machine"])
            ccols = self._columns("cells")
            csel = [c if c in ccols else "NULL" for c in self.CELL_COLUMNS]
            cells = []
            for crow in self.db.execute(f"SELECT id, {', '.join(csel)} FROM cells WHERE run_id=? ORDER BY id",
                                        (run_id,)).fetchall():
                samples = [dict(zip(self.SAMPLE_COLUMNS, srow)) for srow in self.db.execute(
                    f"SELECT {', '.join(self.SAMPLE_COLUMNS)} FROM samples WHERE cell_id=? ORDER BY id",
                    (crow[0],)).fetchall()]
                cells.append({**dict(zip(self.CELL_COLUMNS, crow[1:])), "samples": samples})
            return {"run": run, "cells": cells}
        return self._do(go)

    def has_run_uuid(self, run_uuid: str) -> bool:
        return self._do(lambda: self.db.execute("SELECT 1 FROM runs WHERE uuid=?", (run_uuid,)).fetchone()) is not None

    def import_run(self, rows: dict) -> int:
        """Adds a run from run_rows in one transaction: all of it, or nothing. A run whose stored
        values are not what memsleuth writes (evidence that is not a JSON object, a machine that is
        not one...) is refused with one line, so the target never holds what it cannot show."""
        _check_rows(rows)

        def go():
            run = rows["run"]
            cols = (*self.RUN_COLUMNS, "uuid")
            rid = int(self.db.execute(
                f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) RETURNING id",
                tuple(run[c] for c in cols)).fetchone()[0])
            for cell in rows["cells"]:
                cid = int(self.db.execute(
                    f"INSERT INTO cells (run_id, {', '.join(self.CELL_COLUMNS)}) VALUES "
                    f"({', '.join('?' * (len(self.CELL_COLUMNS) + 1))}) RETURNING id",
                    (rid, *(cell[c] for c in self.CELL_COLUMNS))).fetchone()[0])
                for smp in cell["samples"]:
                    self.db.execute(f"INSERT INTO samples (cell_id, {', '.join(self.SAMPLE_COLUMNS)}) VALUES "
                                    f"({', '.join('?' * (len(self.SAMPLE_COLUMNS) + 1))})",
                                    (cid, *(smp[c] for c in self.SAMPLE_COLUMNS)))
            self.db.commit()
            return rid
        return self._do(go)

    def merge_from(self, src: "Store", writers_gone: bool = False) -> tuple[list[int], int, int, list[str]]:
        """Imports every run of `src` this store lacks (by run UUID): (the new run ids, how many
        were present, how many are still being written, one line per damaged run not imported).
        A run whose writer is gone is imported as interrupted, never as running: with
        `writers_gone` (a fleet task that Slurm ended) every run still marked running is; without
        it, one still running elsewhere is left for a later merge."""
        added, present, running, damaged = [], 0, 0, []
        for rid in src.run_ids():
            status = src.run_status(rid)
            if status.startswith("running") and not writers_gone:
                running += 1
                continue
            rows = src.run_rows(rid)
            if self.has_run_uuid(rows["run"]["uuid"]):
                present += 1
                continue
            if status != rows["run"]["status"]:
                rows["run"]["status"] = "interrupted"   # running, but its writer is gone
            try:
                added.append(self.import_run(rows))
            except UsageError as e:
                damaged.append(f"run {rid}: {e}")
        return added, present, running, damaged

    def run_status(self, run_id: int) -> str:
        row = self._do(lambda: self.db.execute(f"SELECT {self._liveness_columns()} FROM runs r WHERE id=?",
                                               (run_id,)).fetchone())
        return self._status(*row)

    # ---- reading ----
    def _liveness_columns(self) -> str:
        """What `_status` reads of a run `r`, NULL for what an older store has no column for: its
        status, writer (host, pid, start, system) and last sign of life (heartbeat, last sample, start)."""
        cols = self._do(lambda: self._columns("runs"))
        have = [f"r.{c}" if c in cols else "NULL" for c in ("owner_system", "heartbeat_at")]
        return ("r.status, r.owner_host, r.owner_pid, r.owner_start, " + ", ".join(have) + ", "
                "(SELECT max(s.created_at) FROM samples s JOIN cells c ON c.id = s.cell_id WHERE c.run_id = r.id), "
                "r.created_at")

    def _status(self, status: str, host: str | None, pid: int | None, start: str | None, system: str | None,
                heartbeat: str | None, last_sample: str | None, created: str | None) -> str:
        last_sign = max((t for t in (heartbeat, last_sample, created) if t), default=None)
        return judge_status(status, host=host, pid=pid, start=start, system=system, last_sign=last_sign,
                            here_host=socket.gethostname(), here_system=system_identity(),
                            process=_process_stat(pid) if pid is not None else None,
                            now=datetime.now(timezone.utc))

    def list_runs(self) -> list[RunSummary]:
        """One summary per run, oldest first: what `memsleuth history` prints."""
        def go():
            return self.db.execute(
                "SELECT r.id, r.created_at, r.kind, r.name, r.argv, r.machine, "
                "(SELECT count(*) FROM cells c WHERE c.run_id = r.id AND c.position >= 0), "
                "(SELECT count(*) FROM samples s JOIN cells c ON c.id = s.cell_id WHERE c.run_id = r.id), "
                f"{self._liveness_columns()} FROM runs r ORDER BY r.id").fetchall()
        out = []
        for rid, created, kind, name, argv, machine, ncells, nsamples, *liveness in self._do(go):
            try:
                out.append(RunSummary(rid, created, self._status(*liveness), kind, name,
                                      _json(argv, list), MachineInfo.from_dict(_json(machine, dict)), ncells, nsamples))
            except _DAMAGE:
                out.append(RunSummary(rid, created, "damaged", kind, name, [], MachineInfo(), ncells, nsamples))
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
        has_uuid = "uuid" in self._do(lambda: self._columns("runs"))
        row = self._do(lambda: self.db.execute(
            "SELECT id, created_at, finished_at, status, kind, name, argv, spec, machine, version, owner_host, "
            f"owner_pid, owner_start, {'uuid' if has_uuid else 'NULL'} FROM runs WHERE id=?", (run_id,)).fetchone())
        if row is None:
            raise UsageError(f"{self.path}: no run {run_id} (runs: {', '.join(map(str, self.run_ids())) or 'none'})")

        def cells():
            out = []
            has_where = "where_sites" in self._columns("cells")
            for cid, pos, alloc, params, env, command, where in self.db.execute(
                    "SELECT id, position, allocator, params, env, command, "
                    f"{'where_sites' if has_where else 'NULL'} FROM cells WHERE run_id=? ORDER BY position",
                    (run_id,)).fetchall():
                samples = []
                for rnd, warm, ev in self.db.execute(
                        "SELECT round, warmup, evidence FROM samples WHERE cell_id=? ORDER BY id", (cid,)):
                    doc = _json(ev, dict)
                    samples.append((rnd, bool(warm), Sample.from_msrun(doc, doc.get("result"))))
                out.append(StoredCell(cid, pos, AllocatorInfo.from_dict(json.loads(alloc)), json.loads(params),
                                      json.loads(env), json.loads(command), samples,
                                      CallSites.from_dict(json.loads(where)) if where else None))
            return out
        try:
            stored = self._do(cells)
            reference = next((c for c in stored if c.position == REFERENCE_POSITION), None)
            return StoredRun(row[0], row[1], row[2], self.run_status(run_id), row[4], row[5],
                             _json(row[6], list), RunSpec.from_dict(_json(row[7], dict)),
                             MachineInfo.from_dict(_json(row[8], dict)), row[9],
                             [c for c in stored if c.position != REFERENCE_POSITION], reference,
                             row[13] or legacy_uuid(row[0], row[1], row[6], row[8]))
        except _DAMAGE as e:
            raise StoreError(f"{self.path}: run {run_id} is damaged and cannot be read ({type(e).__name__}: "
                             f"{str(e)[:200]}); the other runs are unaffected") from None


# What a stored value that memsleuth did not write raises when it is read.
_DAMAGE = (json.JSONDecodeError, TypeError, ValueError, KeyError, AttributeError, OverflowError)


def _json(text, kind: type):
    """A stored JSON value, which must be of `kind` (a dict, a list): else ValueError."""
    v = json.loads(text)
    if not isinstance(v, kind):
        raise ValueError(f"expected a JSON {kind.__name__}, found {type(v).__name__}")
    return v


def _schema_number(value, path) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise StoreError(f"{path}: its schema version {str(value)[:40]!r} is not a number: the store is damaged") from None


def _check_rows(rows: dict) -> None:
    """The rows of a run to import (run_rows), checked the way load_run will read them."""
    run = rows.get("run") or {}
    who = f"run {run.get('uuid') or run.get('id') or '?'}"
    try:
        _json(run["argv"], list)
        _json(run["spec"], dict)
        _json(run["machine"], dict)
        for cell in rows["cells"]:
            _json(cell["allocator"], dict)
            _json(cell["params"], dict)
            _json(cell["env"], dict)
            _json(cell["command"], list)
            for smp in cell["samples"]:
                Sample.from_msrun(_json(smp["evidence"], dict))
    except _DAMAGE as e:
        raise UsageError(f"{who} of the source is damaged ({type(e).__name__}: {str(e)[:200]}): not imported") from None
