"""`memsleuth show [RUN]`: reprint a stored run (the latest by default)."""
from __future__ import annotations

from rich.console import Console

from memsleuth.commands import options
from memsleuth.session import emit
from memsleuth.store import Store

NAME = "show"
HELP = "reprint a stored run (the latest by default)"


def add_arguments(s) -> None:
    s.add_argument("run", nargs="?", help="run id")
    options.add_store(s)
    options.add_outputs(s)


def run(args, command, console: Console) -> int:
    options.writable_output(args.md, "--md")
    options.writable_output(args.json, "--json")
    options.writable_output(args.html, "--html")
    store = Store(args.db, readonly=True)
    emit(store.load_run(options.run_id(args.run) if args.run is not None else None), args, console)
    return 0
