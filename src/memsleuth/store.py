"""The store: one SQLite file (WAL), runs -> cells -> samples.

Every sample is committed as soon as it exists, so an interrupted run keeps what it finished.
The schema uses only portable SQL types so that a PostgreSQL store can follow for teams.
"""
from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from memsleuth.errors import UsageError
from memsleuth.evidence import Sample

SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    created_at TEXT NOT NULL,
    finished_at TEXT,
    status TEXT NOT NULL,            -- running, complete, interrupted
    kind TEXT NOT NULL,              -- workload, command
    name TEXT NOT NULL,              -- workload name or program
    argv TEXT NOT NULL,              -- JSON list: the memsleuth command line
    spec TEXT NOT NULL,              -- JSON: reps, timeout, swept parameters, ...
    machine TEXT NOT NULL,           -- JSON: CPU, kernel, glibc, THP, allocator versions
    version TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS cells (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    position INTEGER NOT NULL,
    allocator TEXT NOT NULL,         -- JSON: name, path, version, source
    params TEXT NOT NULL,            -- JSON object
    env TEXT NOT NULL,               -- JSON object
    command TEXT NOT NULL            -- JSON list
);
CREATE TABLE IF NOT EXISTS samples (
    id INTEGER PRIMARY KEY,
    cell_id INTEGER NOT NULL REFERENCES cells(id),
    round INTEGER NOT NULL,          -- interleaving round; -1 for warm-up runs
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


@dataclass
class StoredCell:
    id: int
    position: int
    allocator: dict
    params: dict
    env: dict
    command: list
    samples: list[tuple[int, bool, Sample]]  # (round, warmup, sample)

    @property
    def label(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return self.allocator["name"] + (f" [{shown}]" if shown else "")

    def measured(self) -> list[tuple[int, Sample]]:
        return [(r, s) for r, w, s in self.samples if not w]


@dataclass
class StoredRun:
    id: int
    created_at: str
    finished_at: str | None
    status: str
    kind: str
    name: str
    argv: list
    spec: dict
    machine: dict
    version: str
    cells: list[StoredCell]


class Store:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._check_path()
        try:
            self.db = sqlite3.connect(str(self.path), timeout=30)
            self.db.execute("PRAGMA journal_mode=WAL")
            # In WAL mode NORMAL still survives a crash of memsleuth (only a power loss can drop
            # the last commits), and saves an fsync per sample.
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            self.db.executescript(_SCHEMA)
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            self.db.commit()
            self._check_schema()
        except sqlite3.DatabaseError as e:
            raise UsageError(f"{self.path}: not a usable memsleuth database ({e})") from None

    def _check_path(self) -> None:
        p = self.path
        if p.exists():
            if p.is_dir():
                raise UsageError(f"{p}: is a directory, not a database file")
            with open(p, "rb") as f:
                head = f.read(16)
            if head and head != b"SQLite format 3\x00":
                raise UsageError(f"{p}: not an SQLite database (corrupt, or some other file)")
            if not os.access(p, os.W_OK):
                raise UsageError(f"{p}: database is not writable")
        else:
            parent = p.parent if str(p.parent) else Path(".")
            if not parent.is_dir():
                raise UsageError(f"{p}: cannot create the database: {parent} is not a directory")
            if not os.access(parent, os.W_OK):
                raise UsageError(f"{p}: cannot create the database: {parent} is not writable")

    def _check_schema(self) -> None:
        row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row and int(row[0]) > SCHEMA_VERSION:
            raise UsageError(f"{self.path}: made by a newer memsleuth (schema {row[0]}); upgrade memsleuth")

    def close(self) -> None:
        self.db.close()

    # ---- writing ----
    def begin_run(self, *, kind: str, name: str, argv: list[str], spec: dict, machine: dict, version: str) -> int:
        cur = self.db.execute(
            "INSERT INTO runs (created_at, status, kind, name, argv, spec, machine, version) VALUES (?,?,?,?,?,?,?,?)",
            (_now(), "running", kind, name, json.dumps(argv), json.dumps(spec), json.dumps(machine), version))
        self.db.commit()
        return int(cur.lastrowid)

    def add_cell(self, run_id: int, position: int, *, allocator: dict, params: dict, env: dict, command: list) -> int:
        cur = self.db.execute(
            "INSERT INTO cells (run_id, position, allocator, params, env, command) VALUES (?,?,?,?,?,?)",
            (run_id, position, json.dumps(allocator), json.dumps(params), json.dumps(env), json.dumps(command)))
        self.db.commit()
        return int(cur.lastrowid)

    def add_sample(self, cell_id: int, round_: int, warmup: bool, sample: Sample) -> None:
        evidence = dict(sample.raw)
        evidence["result"] = sample.result
        self.db.execute(
            "INSERT INTO samples (cell_id, round, warmup, status, created_at, evidence) VALUES (?,?,?,?,?,?)",
            (cell_id, round_, int(warmup), sample.status, _now(), json.dumps(evidence)))
        self.db.commit()

    def finish_run(self, run_id: int, status: str, machine_update: dict | None = None) -> None:
        """Ends a run; machine_update adds what is only known at the end (the load average then)."""
        if machine_update:
            row = self.db.execute("SELECT machine FROM runs WHERE id=?", (run_id,)).fetchone()
            machine = {**json.loads(row[0]), **machine_update}
            self.db.execute("UPDATE runs SET machine=? WHERE id=?", (json.dumps(machine), run_id))
        self.db.execute("UPDATE runs SET status=?, finished_at=? WHERE id=?", (status, _now(), run_id))
        self.db.commit()

    def list_runs(self) -> list[dict]:
        """One summary per run, oldest first: what `memsleuth history` prints."""
        rows = self.db.execute(
            "SELECT r.id, r.created_at, r.status, r.kind, r.name, r.argv, r.machine, "
            "(SELECT count(*) FROM cells c WHERE c.run_id = r.id), "
            "(SELECT count(*) FROM samples s JOIN cells c ON c.id = s.cell_id WHERE c.run_id = r.id) "
            "FROM runs r ORDER BY r.id").fetchall()
        out = []
        for rid, created, status, kind, name, argv, machine, ncells, nsamples in rows:
            m = json.loads(machine)
            out.append({"id": rid, "created_at": created, "status": status, "kind": kind, "name": name,
                        "argv": json.loads(argv), "machine": f"{m.get('hostname')} ({m.get('cpu_model')}, "
                                                             f"{m.get('kernel')})",
                        "cells": ncells, "samples": nsamples})
        return out

    # ---- reading ----
    def latest_run_id(self) -> int | None:
        row = self.db.execute("SELECT max(id) FROM runs").fetchone()
        return row[0] if row and row[0] is not None else None

    def run_ids(self) -> list[int]:
        return [r[0] for r in self.db.execute("SELECT id FROM runs ORDER BY id")]

    def load_run(self, run_id: int | None = None) -> StoredRun:
        if run_id is None:
            run_id = self.latest_run_id()
            if run_id is None:
                raise UsageError(f"{self.path}: no runs stored yet (run `memsleuth compare` first)")
        row = self.db.execute(
            "SELECT id, created_at, finished_at, status, kind, name, argv, spec, machine, version FROM runs WHERE id=?",
            (run_id,)).fetchone()
        if row is None:
            raise UsageError(f"{self.path}: no run {run_id} (runs: {', '.join(map(str, self.run_ids())) or 'none'})")
        cells = []
        for cid, pos, alloc, params, env, command in self.db.execute(
                "SELECT id, position, allocator, params, env, command FROM cells WHERE run_id=? ORDER BY position",
                (run_id,)):
            samples = []
            for rnd, warm, ev in self.db.execute(
                    "SELECT round, warmup, evidence FROM samples WHERE cell_id=? ORDER BY id", (cid,)):
                doc = json.loads(ev)
                samples.append((rnd, bool(warm), Sample.from_msrun(doc, doc.get("result"))))
            cells.append(StoredCell(cid, pos, json.loads(alloc), json.loads(params), json.loads(env),
                                    json.loads(command), samples))
        return StoredRun(row[0], row[1], row[2], row[3], row[4], row[5], json.loads(row[6]), json.loads(row[7]),
                         json.loads(row[8]), row[9], cells)
