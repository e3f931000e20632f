"""The `memsleuth` command: compare, show, doctor.

Bad input is a UsageError: one line on stderr and exit code 2, never a traceback.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from rich.console import Console

from memsleuth import __version__, allocators, machine, plan as planning, runner, workloads
from memsleuth.errors import UsageError
from memsleuth.store import Store
from memsleuth.units import parse_size_bytes

DEFAULT_DB = "memsleuth.db"
DEFAULT_REPS = 10       # order-statistic 95% CI of the median: ranks 2 and 9 of 10 (97.9% coverage)
DEFAULT_TIMEOUT_S = 120.0


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _writable_output(path: str | None, what: str) -> None:
    if path is None:
        return
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise UsageError(f"{what} {path}: is a directory")
    if not parent.is_dir() or not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise UsageError(f"{what} {path}: cannot write there")


def _positive_float(text: str, what: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise UsageError(f"{what} must be a number of seconds, got {text!r}") from None
    if not v > 0:
        raise UsageError(f"{what} must be positive, got {text!r}")
    return v


def _reps(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise UsageError(f"--reps must be an integer, got {text!r}") from None
    if v < 1:
        raise UsageError(f"--reps must be at least 1, got {text!r}")
    return v


def _check_command(command: list[str]) -> None:
    prog = command[0]
    if os.sep in prog:
        if not os.path.isfile(prog) or not os.access(prog, os.X_OK):
            raise UsageError(f"command {prog}: not an executable file")
    elif shutil.which(prog) is None:
        raise UsageError(f"command {prog}: not found in PATH")


def _emit(run_id: int, store: Store, args, console: Console) -> None:
    """The report on stdout; where the other formats went, on stderr (stdout stays the report)."""
    from memsleuth.report import json_export, markdown, model, terminal
    run = store.load_run(run_id)
    report = model.build(run)
    terminal.render(report, console)
    if getattr(args, "md", None):
        Path(args.md).write_text(markdown.render(report))
        print(f"memsleuth: Markdown report written to {args.md}", file=sys.stderr)
    if getattr(args, "json", None):
        Path(args.json).write_text(json_export.render(run))
        print(f"memsleuth: JSON export written to {args.json}", file=sys.stderr)


def cmd_compare(args, command: list[str] | None, console: Console) -> int:
    _writable_output(args.md, "--md")
    _writable_output(args.json, "--json")
    reps = _reps(args.reps)
    timeout = _positive_float(args.timeout, "--timeout")
    mem_limit = parse_size_bytes(args.mem_limit) if args.mem_limit else None
    if command:
        if args.workload or args.param:
            raise UsageError("give either a workload (--workload/--param) or a command after --, not both")
        _check_command(command)
    else:
        workload = workloads.get(args.workload or "random-mixed")
    allocs = allocators.resolve(args.alloc)
    if command:
        p = planning.command_plan(command, allocs, reps=reps, timeout_s=timeout, mem_limit_bytes=mem_limit)
    else:
        p = planning.workload_plan(workload, allocs, args.param or [], reps=reps, timeout_s=timeout,
                                   mem_limit_bytes=mem_limit)
    store = Store(args.db)
    spec = {"reps": p.reps, "warmup": p.warmup, "swept": list(p.swept), "timeout_s": p.timeout_s,
            "mem_limit_bytes": p.mem_limit_bytes, "command": command or None,
            "interleaving": "rounds, rotated order"}
    run_id = store.begin_run(kind=p.kind, name=p.name, argv=sys.argv, spec=spec,
                             machine=machine.info([a.to_dict() for a in allocs]), version=__version__)
    cell_ids = [store.add_cell(run_id, i, allocator=c.allocator.to_dict(), params=c.params, env=c.env,
                               command=list(c.command)) for i, c in enumerate(p.cells)]
    total = len(runner.schedule(p))
    print(f"memsleuth: run {run_id}: {len(p.cells)} cells x ({p.reps} rounds + {p.warmup} warm-up) = "
          f"{total} runs, stored in {args.db}", file=sys.stderr, flush=True)
    outcome = runner.run(p, store, run_id, cell_ids, console=Console(stderr=True))
    if outcome.interrupted:
        _emit(run_id, store, args, console)
        console.print(f"\nInterrupted: kept {outcome.samples} finished runs of run {run_id}. "
                      f"Show them with: memsleuth show {run_id} --db {args.db}", style="yellow")
        return 130
    _emit(run_id, store, args, console)
    return 0


def cmd_show(args, console: Console) -> int:
    _writable_output(args.md, "--md")
    _writable_output(args.json, "--json")
    if not Path(args.db).exists():
        raise UsageError(f"{args.db}: no such database (run `memsleuth compare` first, or give --db FILE)")
    store = Store(args.db)
    run_id = None
    if args.run is not None:
        try:
            run_id = int(args.run)
        except ValueError:
            raise UsageError(f"run must be a number, got {args.run!r}") from None
    run = store.load_run(run_id)
    _emit(run.id, store, args, console)
    return 0


def cmd_doctor(console: Console) -> int:
    from rich.table import Table
    from memsleuth import doctor
    table = Table(title="memsleuth doctor: what this machine can measure", title_justify="left")
    table.add_column("check")
    table.add_column("value")
    table.add_column("what it means for the numbers", overflow="fold")
    for c in doctor.checks():
        table.add_row(c.name, ("" if c.ok else "[yellow]") + c.value, c.meaning)
    console.print(table)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="memsleuth", description="Measure memory behaviour the right way, and explain it.")
    parser.add_argument("--version", action="version", version=f"memsleuth {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    c = sub.add_parser("compare", help="compare allocators on a workload or on any command",
                       description="Compare allocators on a built-in workload, or on any command given after --.")
    c.add_argument("--workload", metavar="NAME", help="built-in workload (default: random-mixed)")
    c.add_argument("--alloc", metavar="LIST", help="comma-separated names or NAME=PATH.so (default: all found)")
    c.add_argument("--param", metavar="KEY=V1,V2,...", action="append", help="workload parameter; several values sweep it")
    c.add_argument("--reps", metavar="N", default=str(DEFAULT_REPS), help=f"interleaved rounds (default {DEFAULT_REPS})")
    c.add_argument("--timeout", metavar="SECONDS", default=str(DEFAULT_TIMEOUT_S),
                   help=f"per run; past it the run is killed and recorded as TIMEOUT (default {DEFAULT_TIMEOUT_S:g})")
    c.add_argument("--mem-limit", metavar="SIZE", help="resident-memory cap per run, like 2G; past it: OOM")
    c.add_argument("--db", metavar="FILE", default=DEFAULT_DB, help=f"SQLite store (default {DEFAULT_DB})")
    c.add_argument("--md", metavar="FILE", help="also write the report as Markdown")
    c.add_argument("--json", metavar="FILE", help="also export the run as JSON (docs/json-schema.md)")

    s = sub.add_parser("show", help="reprint a stored run (the latest by default)")
    s.add_argument("run", nargs="?", help="run id")
    s.add_argument("--db", metavar="FILE", default=DEFAULT_DB)
    s.add_argument("--md", metavar="FILE")
    s.add_argument("--json", metavar="FILE")

    sub.add_parser("doctor", help="what this machine can measure and what makes numbers noisy")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = None
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1:]
    # Piped output (a file, CI logs) gets wide tables rather than the 80-column default.
    console = Console(width=None if sys.stdout.isatty() else 200)
    try:
        args = build_parser().parse_args(argv)
        if command is not None and args.command != "compare":
            raise UsageError("a command after -- is only taken by `memsleuth compare`")
        if command is not None and not command:
            raise UsageError("no command after --")
        if args.command == "compare":
            return cmd_compare(args, command, console)
        if args.command == "show":
            return cmd_show(args, console)
        if args.command == "doctor":
            return cmd_doctor(console)
        build_parser().print_help()
        return 2
    except UsageError as e:
        print(f"memsleuth: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("memsleuth: interrupted", file=sys.stderr)
        return 130
