"""The `memsleuth` command: compare, case, check, show, diff, history, export, doctor.

Bad input is a UsageError: one line on stderr and exit code 2, never a traceback.
"""
from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
from pathlib import Path

from rich.console import Console

from memsleuth import __version__, allocators, machine, plan as planning, runner, workloads
from memsleuth.errors import UsageError
from memsleuth.store import Store
from memsleuth.units import parse_fraction, parse_size_bytes

DEFAULT_DB = "memsleuth.db"
DEFAULT_TARGET_CI = "2%"   # relative CI half-width at which a cell has enough runs
DEFAULT_MIN_REPS = 6       # the fewest runs whose order statistics give a 95% CI of the median
DEFAULT_MAX_REPS = 30      # keeps `make demo` (20 cells) within about two minutes at worst
DEFAULT_NOISE = "1%"       # differences whose CI stays within +-1% are not called
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
    if not math.isfinite(v):
        raise UsageError(f"{what} must be a finite number of seconds, got {text!r}")
    return v


def _count(text: str, what: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise UsageError(f"{what} must be an integer, got {text!r}") from None
    if v < 1:
        raise UsageError(f"{what} must be at least 1, got {text!r}")
    return v


def _rounds(args) -> planning.Rounds:
    if args.reps is not None:
        if args.min_reps is not None or args.max_reps is not None or args.target_ci is not None:
            raise UsageError("--reps fixes the number of rounds: leave out --target-ci/--min-reps/--max-reps")
        return planning.Rounds.fixed(_count(args.reps, "--reps"))
    hi = _count(args.max_reps, "--max-reps") if args.max_reps else None
    # An explicit --max-reps below the default minimum lowers the minimum with it.
    lo = _count(args.min_reps, "--min-reps") if args.min_reps else min(DEFAULT_MIN_REPS, hi or DEFAULT_MIN_REPS)
    hi = hi if hi is not None else max(DEFAULT_MAX_REPS, lo)
    if hi < lo:
        raise UsageError(f"--max-reps ({hi}) must not be below --min-reps ({lo})")
    return planning.Rounds(lo, hi, parse_fraction(args.target_ci or DEFAULT_TARGET_CI, "--target-ci"))


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
    build = {"check": model.build_check, "case": model.build_case}.get(run.kind, model.build)
    report = build(run)
    terminal.render(report, console)
    if getattr(args, "md", None):
        Path(args.md).write_text(markdown.render(report))
        print(f"memsleuth: Markdown report written to {args.md}", file=sys.stderr)
    if getattr(args, "json", None):
        Path(args.json).write_text(json_export.render(run))
        print(f"memsleuth: JSON export written to {args.json}", file=sys.stderr)


def _begin(store: Store, p: planning.Plan, kind: str, name: str, spec: dict, allocs) -> tuple[int, list[int]]:
    """A new run in the store with its cells; every sample is added to it as it exists."""
    run_id = store.begin_run(kind=kind, name=name, argv=sys.argv, spec=spec,
                             machine=machine.info([a.to_dict() for a in allocs]), version=__version__)
    cell_ids = [store.add_cell(run_id, i, allocator=c.allocator.to_dict(), params=c.params, env=c.env,
                               command=list(c.command)) for i, c in enumerate(p.cells)]
    return run_id, cell_ids


def cmd_compare(args, command: list[str] | None, console: Console) -> int:
    _writable_output(args.md, "--md")
    _writable_output(args.json, "--json")
    rounds = _rounds(args)
    noise = parse_fraction(args.noise, "--noise")
    env = planning.parse_env_options(args.env or [])
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
        p = planning.command_plan(command, allocs, rounds=rounds, timeout_s=timeout, mem_limit_bytes=mem_limit,
                                  env=env)
    else:
        p = planning.workload_plan(workload, allocs, args.param or [], rounds=rounds, timeout_s=timeout,
                                   mem_limit_bytes=mem_limit, env=env)
    store = Store(args.db)
    spec = {"rounds": p.rounds.describe(), "min_reps": p.rounds.min_reps, "max_reps": p.rounds.max_reps,
            "target_ci": p.rounds.target_ci, "noise": noise, "env": env,
            "warmup": p.warmup, "swept": list(p.swept), "timeout_s": p.timeout_s,
            "mem_limit_bytes": p.mem_limit_bytes, "command": command or None,
            "interleaving": "rounds, rotated order"}
    run_id, cell_ids = _begin(store, p, p.kind, p.name, spec, allocs)
    print(f"memsleuth: run {run_id}: {len(p.cells)} cells, {p.rounds.describe()} + {p.warmup} warm-up each; "
          f"stored in {args.db}", file=sys.stderr, flush=True)
    outcome = runner.run(p, store, run_id, cell_ids, console=Console(stderr=True))
    if outcome.interrupted:
        _emit(run_id, store, args, console)
        console.print(f"\nInterrupted: kept {outcome.samples} finished runs of run {run_id}. "
                      f"Show them with: memsleuth show {run_id} --db {args.db}", style="yellow")
        return 130
    _emit(run_id, store, args, console)
    return 0


def cmd_case(args, console: Console) -> int:
    from memsleuth import cases
    if args.list:
        from rich.table import Table
        table = Table(title="memsleuth cases", title_justify="left")
        for col in ("case", "seed", "what it shows", "parameters"):
            table.add_column(col, overflow="fold")
        for c in cases.CASES.values():
            table.add_row(c.name, c.seed, c.summary, ", ".join(p.name for p in c.params))
        console.print(table)
        return 0
    if not args.name:
        raise UsageError("case needs a name: see `memsleuth case --list`")
    case = cases.get(args.name)
    _writable_output(args.md, "--md")
    _writable_output(args.json, "--json")
    values = case.parse_params(args.param or [])
    reps = _count(args.reps, "--reps") if args.reps is not None else case.default_reps
    timeout = _positive_float(args.timeout, "--timeout")
    mem_limit = parse_size_bytes(args.mem_limit) if args.mem_limit else None
    if args.alloc is not None:
        allocs = allocators.resolve(args.alloc)
    else:
        found = allocators.available()
        allocs = found if case.default_allocators is None else [a for a in found if a.name in case.default_allocators]
    facts = case.prepare(values)
    p = cases.case_plan(case, case.variants(values, facts), allocs, reps=reps, timeout_s=timeout,
                        mem_limit_bytes=mem_limit)
    store = Store(args.db)
    spec = {"rounds": p.rounds.describe(), "reps": reps, "warmup": p.warmup, "swept": list(p.swept),
            "timeout_s": p.timeout_s, "mem_limit_bytes": p.mem_limit_bytes, "case": case.name,
            "case_params": {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()},
            "facts": facts, "interleaving": "rounds, rotated order"}
    run_id, cell_ids = _begin(store, p, "case", case.name, spec, allocs)
    print(f"memsleuth: case {case.name}, run {run_id}: {len(p.cells)} cells x {reps} rounds"
          f"{f' + {p.warmup} warm-up' if p.warmup else ''}; stored in {args.db}", file=sys.stderr, flush=True)
    outcome = runner.run(p, store, run_id, cell_ids, console=Console(stderr=True))
    _emit(run_id, store, args, console)
    if outcome.interrupted:
        console.print(f"\nInterrupted: kept {outcome.samples} finished runs of run {run_id}. "
                      f"Show them with: memsleuth show {run_id} --db {args.db}", style="yellow")
        return 130
    return 0


def cmd_check(args, command: list[str] | None, console: Console) -> int:
    if not command:
        raise UsageError("check needs a command after --, like: memsleuth check -- ./my-benchmark")
    _writable_output(args.md, "--md")
    _writable_output(args.json, "--json")
    _check_command(command)
    reps = _count(args.reps, "--reps")
    env = planning.parse_env_options(args.env or [])
    allocs = allocators.resolve(args.alloc or "glibc")
    if len(allocs) != 1:
        raise UsageError("check runs one allocator: give one name to --alloc (compare several with `compare`)")
    p = planning.command_plan(command, allocs, rounds=planning.Rounds.fixed(reps), warmup=0,
                              timeout_s=_positive_float(args.timeout, "--timeout"),
                              mem_limit_bytes=parse_size_bytes(args.mem_limit) if args.mem_limit else None, env=env)
    store = Store(args.db)
    spec = {"rounds": p.rounds.describe(), "warmup": 0, "swept": [], "timeout_s": p.timeout_s,
            "mem_limit_bytes": p.mem_limit_bytes, "command": command, "env": env}
    run_id, cell_ids = _begin(store, p, "check", command[0], spec, allocs)
    outcome = runner.run(p, store, run_id, cell_ids, console=Console(stderr=True))
    _emit(run_id, store, args, console)
    return 130 if outcome.interrupted else 0


def cmd_show(args, console: Console) -> int:
    _writable_output(args.md, "--md")
    _writable_output(args.json, "--json")
    store = _open_existing(args.db)
    run = store.load_run(_run_id(args.run) if args.run is not None else None)
    _emit(run.id, store, args, console)
    return 0


def _open_existing(db: str) -> Store:
    if not Path(db).exists():
        raise UsageError(f"{db}: no such database (run `memsleuth compare` first, or give --db FILE)")
    return Store(db)


def _run_id(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"run must be a number, got {text!r}") from None


def cmd_diff(args, console: Console) -> int:
    from memsleuth import regression
    from memsleuth.report import markdown, model, terminal
    _writable_output(args.md, "--md")
    threshold = parse_fraction(args.threshold, "--threshold")
    store = _open_existing(args.db)
    a, b = store.load_run(_run_id(args.run_a)), store.load_run(_run_id(args.run_b))
    changes = regression.compare_runs(a, b, threshold)
    report = model.build_diff(a, b, changes, threshold)
    terminal.render(report, console)
    if args.md:
        Path(args.md).write_text(markdown.render(report))
        print(f"memsleuth: Markdown written to {args.md}", file=sys.stderr)
    return 1 if any(ch.regression for ch in changes) else 0


def cmd_history(args, console: Console) -> int:
    from rich.table import Table
    store = _open_existing(args.db)
    table = Table(title=f"runs in {args.db}", title_justify="left")
    for col in ("id", "time (UTC)", "status", "command", "machine", "cells", "runs"):
        table.add_column(col, justify="right" if col in ("id", "cells", "runs") else "left")
    for r in store.list_runs():
        argv = r["argv"]
        shown = " ".join(["memsleuth", *argv[1:]]) if argv else r["name"]
        table.add_row(str(r["id"]), r["created_at"], r["status"], shown, r["machine"], str(r["cells"]),
                      str(r["samples"]))
    console.print(table)
    return 0


def cmd_export(args, console: Console) -> int:
    from memsleuth.report import exports, json_export
    store = _open_existing(args.db)
    run = store.load_run(_run_id(args.run))
    if args.format == "pyperf":
        if not args.output:
            raise UsageError("--format pyperf writes a file: give --output FILE")
        _writable_output(args.output, "--output")
        exports.to_pyperf(run, args.output)
        print(f"memsleuth: pyperf JSON written to {args.output}", file=sys.stderr)
        return 0
    text = json_export.render(run) if args.format == "json" else exports.to_csv(run)
    if args.output:
        _writable_output(args.output, "--output")
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
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
    c.add_argument("--reps", metavar="N", help="run exactly N interleaved rounds (default: adaptive, see --target-ci)")
    c.add_argument("--target-ci", metavar="PCT", help=f"add rounds until each median's 95%% CI half-width is at "
                   f"most this (default {DEFAULT_TARGET_CI})")
    c.add_argument("--min-reps", metavar="N", help=f"adaptive: at least N rounds (default {DEFAULT_MIN_REPS})")
    c.add_argument("--max-reps", metavar="N", help=f"adaptive: at most N rounds (default {DEFAULT_MAX_REPS})")
    c.add_argument("--noise", metavar="PCT", default=DEFAULT_NOISE,
                   help=f"call a difference only when its CI lies beyond this (default {DEFAULT_NOISE})")
    c.add_argument("--env", metavar="KEY=VALUE", action="append",
                   help="set in every measured process (tunables, allocator options); repeatable")
    c.add_argument("--timeout", metavar="SECONDS", default=str(DEFAULT_TIMEOUT_S),
                   help=f"per run; past it the run is killed and recorded as TIMEOUT (default {DEFAULT_TIMEOUT_S:g})")
    c.add_argument("--mem-limit", metavar="SIZE", help="resident-memory cap per run, like 2G; past it: OOM")
    c.add_argument("--db", metavar="FILE", default=DEFAULT_DB, help=f"SQLite store (default {DEFAULT_DB})")
    c.add_argument("--md", metavar="FILE", help="also write the report as Markdown")
    c.add_argument("--json", metavar="FILE", help="also export the run as JSON (docs/json-schema.md)")

    cs = sub.add_parser("case", help="run a case study (the seed field reports), explained from its evidence",
                        description="Run a case study: its question, its measurements with units, and what the "
                                    "evidence shows. `memsleuth case --list` names them; docs/cases.md explains each.")
    cs.add_argument("name", nargs="?", metavar="NAME", help="the case to run")
    cs.add_argument("--list", action="store_true", help="list the cases, one line each")
    cs.add_argument("--param", metavar="KEY=VALUE", action="append",
                    help="case parameter; list parameters take V1,V2 (see --list for the names)")
    cs.add_argument("--alloc", metavar="LIST", help="comma-separated names or NAME=PATH.so "
                    "(default: the case's own, those installed)")
    cs.add_argument("--reps", metavar="N", help="interleaved rounds (default: the case's own)")
    cs.add_argument("--timeout", metavar="SECONDS", default=str(DEFAULT_TIMEOUT_S))
    cs.add_argument("--mem-limit", metavar="SIZE", help="resident-memory cap per run, like 2G; past it: OOM")
    cs.add_argument("--db", metavar="FILE", default=DEFAULT_DB)
    cs.add_argument("--md", metavar="FILE", help="also write the report as Markdown")
    cs.add_argument("--json", metavar="FILE", help="also export the run as JSON")

    k = sub.add_parser("check", help="measure any program, its probe regions, and say what the evidence shows",
                       description="Run a program (after --) and report each probe region's evidence, the whole "
                                   "process's, and the findings.")
    k.add_argument("--alloc", metavar="NAME", help="one allocator name or NAME=PATH.so (default glibc)")
    k.add_argument("--reps", metavar="N", default="1", help="runs (default 1)")
    k.add_argument("--env", metavar="KEY=VALUE", action="append", help="set in the measured process; repeatable")
    k.add_argument("--timeout", metavar="SECONDS", default=str(DEFAULT_TIMEOUT_S))
    k.add_argument("--mem-limit", metavar="SIZE")
    k.add_argument("--db", metavar="FILE", default=DEFAULT_DB)
    k.add_argument("--md", metavar="FILE")
    k.add_argument("--json", metavar="FILE")

    s = sub.add_parser("show", help="reprint a stored run (the latest by default)")
    s.add_argument("run", nargs="?", help="run id")
    s.add_argument("--db", metavar="FILE", default=DEFAULT_DB)
    s.add_argument("--md", metavar="FILE")
    s.add_argument("--json", metavar="FILE")

    d = sub.add_parser("diff", help="compare two stored runs cell by cell; exit 1 on a resolved regression")
    d.add_argument("run_a", metavar="RUN_A")
    d.add_argument("run_b", metavar="RUN_B")
    d.add_argument("--threshold", metavar="PCT", default="5%",
                   help="call a change only when its whole CI lies beyond this (default 5%%)")
    d.add_argument("--db", metavar="FILE", default=DEFAULT_DB)
    d.add_argument("--md", metavar="FILE", help="also write the comparison as Markdown (for a pull request)")

    h = sub.add_parser("history", help="list the stored runs")
    h.add_argument("--db", metavar="FILE", default=DEFAULT_DB)

    e = sub.add_parser("export", help="export a stored run as json, csv or pyperf")
    e.add_argument("run", metavar="RUN")
    e.add_argument("--format", choices=("json", "csv", "pyperf"), default="json")
    e.add_argument("--output", "-o", metavar="FILE", help="write here (default: stdout; pyperf needs a file)")
    e.add_argument("--db", metavar="FILE", default=DEFAULT_DB)

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
        if command is not None and args.command not in ("compare", "check"):
            raise UsageError("a command after -- is only taken by `memsleuth compare` and `memsleuth check`")
        if command is not None and not command:
            raise UsageError("no command after --")
        if args.command == "compare":
            return cmd_compare(args, command, console)
        if args.command == "check":
            return cmd_check(args, command, console)
        if args.command == "case":
            return cmd_case(args, console)
        if args.command == "show":
            return cmd_show(args, console)
        if args.command == "doctor":
            return cmd_doctor(console)
        if args.command == "diff":
            return cmd_diff(args, console)
        if args.command == "history":
            return cmd_history(args, console)
        if args.command == "export":
            return cmd_export(args, console)
        build_parser().print_help()
        return 2
    except UsageError as e:
        print(f"memsleuth: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("memsleuth: interrupted", file=sys.stderr)
        return 130
