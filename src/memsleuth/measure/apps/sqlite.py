"""An embedded database: a bulk load of 300,000 rows into an in-memory SQLite database, an index
built over text keys, and range and aggregate queries (B-tree pages, its page cache, many small
rows). The keys are a permutation, so the range holds exactly 100,000 of them: the check."""
from __future__ import annotations

from pathlib import Path

from memsleuth.measure.apps.base import DONE, START, App

ROWS = 300_000

SQL = f"""
CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v INTEGER, pad TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {ROWS})
INSERT INTO t SELECT x, printf('key%08d', (x * 7919) % {ROWS}), x % 1000, hex(randomblob(16)) FROM c;
CREATE INDEX tk ON t(k);
SELECT 'range', count(*) FROM t WHERE k >= 'key00100000' AND k < 'key00200000';
SELECT 'groups', count(*) FROM (SELECT v, count(*) FROM t GROUP BY v);
"""


def prepare(folder: Path) -> None:
    (folder / "load.sql").write_text(SQL)


def script(folder: Path) -> str:
    out = folder / "sqlite.out"
    return (f"{START}; sqlite3 :memory: < '{folder}/load.sql' > '{out}'; "
            f"grep -qx 'range|100000' '{out}'; grep -qx 'groups|1000' '{out}'; {DONE}")


APP = App("sqlite", "an embedded database: a bulk load, an index over text keys, range and aggregate queries",
          ("sqlite3",), ("sqlite3",), script, prepare)
