"""The store's schema, written once: the SQLite store creates it as it is, the PostgreSQL store
(store_pg.py) in its dialect (`ddl`), so that a new column is one line here.

(SQLite's INTEGER PRIMARY KEY is its row id; PostgreSQL's is BIGSERIAL, and the keys that point
at it BIGINT.)"""
from __future__ import annotations

import re

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    created_at TEXT NOT NULL,
    finished_at TEXT,
    status TEXT NOT NULL,            -- running, complete, interrupted, failed
    kind TEXT NOT NULL,              -- workload, command, case, check, try, fleet-task
    name TEXT NOT NULL,              -- workload name or program
    argv TEXT NOT NULL,              -- JSON list: the memsleuth command line
    spec TEXT NOT NULL,              -- JSON: model.RunSpec
    machine TEXT NOT NULL,           -- JSON: model.MachineInfo
    version TEXT NOT NULL,
    owner_host TEXT,                 -- the host and process writing a running run
    owner_pid INTEGER,
    owner_start TEXT,                -- that process's start time (pids are reused)
    uuid TEXT,                       -- the run's identity across stores (merge)
    owner_system TEXT,               -- the boot and PID namespace the writer's pid means something in
    heartbeat_at TEXT                -- the writer's last sign of life (UTC), judged from any host
);
CREATE TABLE IF NOT EXISTS cells (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    position INTEGER NOT NULL,
    allocator TEXT NOT NULL,         -- JSON: model.AllocatorInfo
    params TEXT NOT NULL,            -- JSON object
    env TEXT NOT NULL,               -- JSON object
    command TEXT NOT NULL,           -- JSON list
    where_sites TEXT                 -- JSON: call sites (records/sites.py), or NULL
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


def ddl(dialect: str) -> str:
    """The schema as `dialect` ("sqlite" or "postgresql") takes it."""
    if dialect == "sqlite":
        return SCHEMA
    if dialect != "postgresql":
        raise ValueError(f"no schema for {dialect!r}")
    text = re.sub(r"--[^\n]*", "", SCHEMA)
    text = text.replace("id INTEGER PRIMARY KEY", "id BIGSERIAL PRIMARY KEY")
    return re.sub(r"(\w+_id) INTEGER NOT NULL REFERENCES", r"\1 BIGINT NOT NULL REFERENCES", text)
