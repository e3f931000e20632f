"""`memsleuth merge SOURCE... [--db TARGET]`: runs from other stores (each fleet task's SQLite file,
a colleague's store, a PostgreSQL database) into one. A run is identified by its UUID, so merging
the same source twice adds nothing; machine info and allocator versions travel with the run."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from memsleuth.commands import options
from memsleuth.errors import EXIT_OK, UsageError
from memsleuth.textsafe import safe_text

if TYPE_CHECKING:
    from rich.console import Console

NAME = "merge"


def add_arguments(m) -> None:
    m.add_argument("sources", metavar="SOURCE", nargs="+", help="stores to read: SQLite files or postgresql:// URLs")
    options.add_store(m)


def _same(a: str, b: str) -> bool:
    from memsleuth.records.store import is_url
    if is_url(a) or is_url(b):
        return a == b
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def run(args, command, console: Console) -> int:
    from memsleuth.records.store import Store, is_url
    for src in args.sources:
        if not is_url(src) and not os.path.exists(src):
            raise UsageError(f"{src}: no such store")
        if _same(src, args.db):
            raise UsageError(f"{src} is the target store itself (--db): nothing to merge")
    # Every source is opened (and checked: a memsleuth store, not newer than this memsleuth)
    # before anything is written to the target.
    sources = [Store(src, readonly=True) for src in args.sources]
    target = Store(args.db)
    total_added = 0
    for src in sources:
        new, present, running, damaged = target.merge_from(src)
        added = len(new)
        total_added += added
        note = f", {running} still running (merge again when they end)" if running else ""
        if damaged:
            note += f", {len(damaged)} damaged and not imported ({'; '.join(damaged)})"
        console.print(safe_text(f"{src.path}: {added} run(s) added, {present} already in {target.path}{note}"),
                      highlight=False)
    return EXIT_OK
