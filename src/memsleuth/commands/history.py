"""`memsleuth history`: the stored runs, one line each."""
from __future__ import annotations

import shlex

from rich.console import Console
from rich.table import Table

from memsleuth.textsafe import safe_text

from memsleuth.commands import options

NAME = "history"
HELP = "list the stored runs"


def add_arguments(h) -> None:
    options.add_store(h)


def run(args, command, console: Console) -> int:
    from memsleuth.store import Store
    store = Store(args.db, readonly=True)
    table = Table(title=safe_text(f"runs in {store.path}"), title_justify="left")
    for col in ("id", "time (UTC)", "status", "command", "machine", "cells", "runs"):
        table.add_column(col, justify="right" if col in ("id", "cells", "runs") else "left", overflow="fold")
    for r in store.list_runs():
        shown = shlex.join(["memsleuth", *r.argv[1:]]) if r.argv else r.name
        m = r.machine
        # Every cell is Text: a command line or host name is data, never markup.
        table.add_row(safe_text(str(r.id)), safe_text(r.created_at), safe_text(r.status), safe_text(shown),
                      safe_text(m.name + (f" ({m.cpu_model}, {m.kernel})" if m.cpu_model else "")), safe_text(str(r.cells)),
                      safe_text(str(r.samples)))
    console.print(table)
    return 0
