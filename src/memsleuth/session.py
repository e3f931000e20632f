"""Orchestration below the CLI: begin a stored run, run its plan, finish it, emit the reports,
and turn the outcome into an exit code. Every measuring command (compare, case, check) goes
through `measure`; every command that prints a stored run goes through `emit`.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
import time

from rich.console import Console

from memsleuth import __version__
from memsleuth.measure import machine, plan as planning, runner, workloads
from memsleuth.measure.allocators import Allocator, allocator_info
from memsleuth.errors import EXIT_NO_RESULT, EXIT_OK, STOP_SIGNAL_NAMES, interrupted_exit
from memsleuth.records.model import RunSpec
from memsleuth.report.output import say_written, write_text, write_with
from memsleuth.measure.plan import Plan
from memsleuth.records.stored import REFERENCE_POSITION, StoredRun
from memsleuth.records import store_pg
from memsleuth.records.store import Store


def redacted(argv: list[str]) -> list[str]:
    """The command line as stored and shown: a database URL's password never is. Bytes that were not
    UTF-8 stay as they came (surrogate escapes, which the store's JSON keeps losslessly); each format
    shows them as `\\xff` (textsafe)."""
    from memsleuth.records.store_pg import display
    return [display(a) if "postgres" in a.lower() else a for a in argv]


def spec_for(p: Plan, **extra) -> RunSpec:
    """The one way a RunSpec is built: what the plan fixes (rounds, warm-up, swept parameters,
    limits), then what the command adds or says differently (`extra`)."""
    fields = dict(rounds=p.rounds.describe(), min_reps=p.rounds.min_reps, max_reps=p.rounds.max_reps,
                  target_ci=p.rounds.target_ci, warmup=p.warmup, swept=list(p.swept), timeout_s=p.timeout_s,
                  mem_limit_bytes=p.mem_limit_bytes)
    fields.update(extra)
    return RunSpec(**fields)


def measure(store: Store, p: Plan, *, kind: str, name: str, spec: RunSpec, allocs: list[Allocator],
            announce: str | None = None) -> runner.Outcome:
    """A new run in the store with its cells, run to its end (or Ctrl-C); every sample is stored
    as it exists. Whatever ends the run early (an error, a full disk) marks it so."""
    run_id = store.begin_run(kind=kind, name=name, argv=redacted(sys.argv), spec=spec,
                             machine=machine.info([allocator_info(a) for a in allocs]), version=__version__)
    try:
        cell_ids = [store.add_cell(run_id, i, allocator=allocator_info(c.allocator), params=c.params, env=c.env,
                                   command=list(c.command)) for i, c in enumerate(p.cells)]
        reference_id = None
        if p.reference is not None:
            r = p.reference
            reference_id = store.add_cell(run_id, REFERENCE_POSITION, allocator=allocator_info(r.allocator),
                                          params=r.params, env=r.env, command=list(r.command))
        if announce:
            print(f"memsleuth: run {run_id}: {announce}; stored in {store.path}", file=sys.stderr, flush=True)
        return runner.run(p, store, run_id, cell_ids, console=Console(stderr=True), reference_id=reference_id,
                          meanwhile=while_explaining)
    except BaseException:
        try:
            store.finish_run(run_id, "failed")
        except Exception:  # the store itself may be what failed: the run then reads as interrupted
            pass
        raise


# What reading an explaining run's documents, the analysis and the report import after the runs (a
# check of a C program, seen from sys.modules): loaded while the explaining run goes, so that they are
# not waited for after it (~60 ms here). No import cycle between the package's modules
# (tests/unit/test_layout.py), so this thread and the main one cannot deadlock on their imports.
REPORT_MODULES = ("memsleuth.records.sites", "memsleuth.records.cpu_stacks", "memsleuth.analysis.summary",
                  "memsleuth.analysis.gate", "memsleuth.analysis.stacks", "memsleuth.analysis.tried",
                  "memsleuth.report.builders", "memsleuth.report.builders.case", "memsleuth.report.builders.check",
                  "memsleuth.report.builders.compare", "memsleuth.report.builders.fleet_task",
                  "memsleuth.report.builders.gate", "memsleuth.report.builders.tried", "memsleuth.report.sections",
                  "memsleuth.report.terminal", "memsleuth.report.json_export", "memsleuth.report.markdown",
                  "memsleuth.report.html")


# By then the explaining run's program has started and its loader has mapped its libraries.
WARM_AFTER_S = 0.3


def while_explaining() -> None:
    """check's own work beside its explaining run (runner.run's `meanwhile`): what it imports after
    the run, and the symbolizer made to read the objects the run's program maps."""
    load_the_report()
    warm_the_symbolizer()


def warm_the_symbolizer() -> None:
    """The executable files the explaining run's processes map (the descendants of this process's
    ms-run children: the holder, an ms-run too, has none; memsleuth's own files left out), read by
    the symbolizer while the run goes (records/symbols.warm)."""
    from memsleuth.measure import native
    from memsleuth.records import proc, symbols
    time.sleep(WARM_AFTER_S)
    ms_run = os.path.realpath(native.ms_run())
    ours = os.path.realpath(native.native_dir()) + os.sep
    paths: list[str] = []
    for child in proc.children(os.getpid()):
        try:
            if os.path.realpath(f"/proc/{child}/exe") != ms_run:
                continue
        except OSError:
            continue
        for pid in proc.descendants(child):
            paths += [p for p in proc.executable_files(pid) if not p.startswith(ours) and p not in paths]
    symbols.warm(paths)


def load_the_report() -> None:
    import importlib
    for name in REPORT_MODULES:
        try:
            importlib.import_module(name)
        except Exception:   # noqa: BLE001 - imported again where it is used, which says what failed
            pass


def emit(run: StoredRun, args, console: Console) -> None:
    """The report on stdout; where the other formats went, on stderr (stdout stays the report)."""
    from memsleuth.report import builders, terminal
    t0 = time.monotonic()
    report = builders.for_run(run)
    report.timings["analysis and report"] = round(time.monotonic() - t0, 3)
    t0 = time.monotonic()
    try:
        terminal.render(report, console)
    except BrokenPipeError:   # stdout's reader left (`| head`): the files asked for are still written
        write_formats(report, args)
        raise
    report.timings["terminal output"] = round(time.monotonic() - t0, 3)
    write_formats(report, args)
    if getattr(args, "verbose", False):
        phases = {**run.facts.timings, **report.timings}
        print("memsleuth: where this command's time went: "
              + "; ".join(f"{name} {seconds:.2f} s" for name, seconds in phases.items()), file=sys.stderr)


def write_formats(report, args) -> None:
    """--md, --html, --json, --pprof and --speedscope, each written whole or not at all."""
    from memsleuth.report import html, json_export, markdown
    for attr, fmt, what in (("md", markdown, "Markdown report"), ("html", html, "HTML report"),
                            ("json", json_export, "JSON export")):
        path = getattr(args, attr, None)
        if path:
            write_text(path, fmt.render(report), f"the {what}")
            say_written(what, path)
    if getattr(args, "pprof", None) and report.run is not None:
        from memsleuth.report import pprof_export
        data = pprof_export.render(report.run)
        write_with(args.pprof, lambda tmp: Path(tmp).write_bytes(data), "the pprof profile")
        say_written("pprof profile", args.pprof)
    if getattr(args, "speedscope", None) and report.run is not None:
        from memsleuth.report import speedscope_export
        write_text(args.speedscope, speedscope_export.render(report.run), "the speedscope profile")
        say_written("speedscope profile", args.speedscope)


def write_report_files(report, args, json_doc: dict) -> None:
    """--md and --html of a report that is not one stored run (the suite, machines side by side),
    and --json as the given document."""
    import json
    from memsleuth.report import html, markdown
    for attr, fmt, what in (("md", markdown, "Markdown report"), ("html", html, "HTML report")):
        path = getattr(args, attr, None)
        if path:
            write_text(path, fmt.render(report), f"the {what}")
            say_written(what, path)
    if getattr(args, "json", None):
        write_text(args.json, json.dumps(json_doc, indent=2) + "\n", "the JSON export")
        say_written("JSON export", args.json)


def finish(store: Store, outcome: runner.Outcome, args, console: Console) -> int:
    """Prints the stored run and returns the exit code docs/usage.md documents."""
    run = store.load_run(outcome.run_id)
    emit(run, args, console)
    # Where the run went (the default store is a file in the current folder): on stderr, beside the files.
    print(f"memsleuth: stored as run {run.id} in {store_pg.display(str(store.path))} "
          f"(memsleuth show {run.id} --db {store_pg.display(str(store.path))})", file=sys.stderr)
    if outcome.interrupted:
        how = "Interrupted" if outcome.signum == 2 else f"Terminated ({STOP_SIGNAL_NAMES.get(outcome.signum)})"
        kept = (f"kept {outcome.samples} finished runs of run {run.id}. Show them with: memsleuth show {run.id} "
                f"--db {store.path}" if outcome.samples else
                f"no run had finished: run {run.id} is stored as interrupted, with nothing measured")
        console.print(f"\n{how}: {kept}", style="yellow", markup=False)
        return interrupted_exit(outcome.signum)
    return result_code(run, getattr(args, "fail_on_error", False))


def result_code(run: StoredRun, fail_on_error: bool) -> int:
    """3 when no cell produced a result; with fail_on_error, also when any run failed."""
    measured = [s for c in run.cells for _, w, s in c.samples if not w or not s.ok]
    ok_cells = [c for c in run.cells if any(s.ok for _, w, s in c.samples if not w)]
    if not ok_cells:
        print("memsleuth: no cell produced a result (exit 3)", file=sys.stderr)
        return EXIT_NO_RESULT
    if fail_on_error and any(not s.ok for s in measured):
        bad = sum(1 for s in measured if not s.ok)
        print(f"memsleuth: {bad} run(s) failed, and --fail-on-error was given (exit 3)", file=sys.stderr)
        return EXIT_NO_RESULT
    return EXIT_OK


def run_apps(store: Store, allocs, *, rounds: planning.Rounds, noise: float, env: dict, timeout_s, mem_limit,
             reference: bool, warmup: int = 1) -> tuple[list[StoredRun], bool, list[tuple[str, str]]]:
    """Runs every real application (measure/apps) that is installed, each an ordinary compare of its
    command with its own figure as the metric, one stored run each; returns (the finished runs,
    whether Ctrl-C stopped the suite, the applications skipped with why). Their inputs are made
    once, in a folder removed at the end."""
    from memsleuth.measure import apps, workdirs
    runs: list[StoredRun] = []
    skipped: list[tuple[str, str]] = []
    t0 = time.monotonic()
    with workdirs.workdir("apps") as tmp:
        folder = Path(tmp)
        for k, app in enumerate(apps.APPS):
            missing = app.missing()
            if missing:
                why = (f"not installed: {', '.join(missing)} (Debian: {' '.join(app.packages)}; `make setup` installs "
                       "them as root)")
                skipped.append((app.name, why))
                print(f"memsleuth: apps {k + 1}/{len(apps.APPS)}: {app.name} skipped, {why}", file=sys.stderr,
                      flush=True)
                continue
            app.prepare(folder)
            argv = app.command(folder)
            p = planning.command_plan(argv, allocs, rounds=rounds, timeout_s=timeout_s, mem_limit_bytes=mem_limit,
                                      env=env)
            p = dataclasses.replace(p, name=app.name, metric=app.metric, warmup=warmup)
            if reference:
                p = dataclasses.replace(p, reference=planning.reference_cell())
            spec = spec_for(p, noise=noise, env=env, command=argv, metric=app.metric.to_dict(),
                            facts={"app": {"name": app.name, "exercises": app.exercises, "figure": app.figure}})
            print(f"memsleuth: apps {k + 1}/{len(apps.APPS)}: {app.name} ({app.exercises}), "
                  f"{time.monotonic() - t0:.0f} s elapsed", file=sys.stderr, flush=True)
            outcome = measure(store, p, kind="command", name=app.name, spec=spec, allocs=allocs,
                              announce=f"{len(p.cells)} cells, {p.rounds.describe()}")
            runs.append(store.load_run(outcome.run_id))
            if outcome.interrupted:
                return runs, True, skipped
    return runs, False, skipped


def run_suite(store: Store, allocs, *, rounds: planning.Rounds, noise: float, env: dict, timeout_s, mem_limit,
              variants: list, variant_report: list, reference: bool, warmup: int = 1):
    """Runs every suite workload; returns (the finished runs, whether Ctrl-C stopped the suite)."""
    runs: list[StoredRun] = []
    t0 = time.monotonic()
    for k, w in enumerate(workloads.SUITE):
        options = [f"{name}={value}" for name, value in (w.suite or {}).items()]
        p = planning.workload_plan(w, allocs, options, rounds=rounds, timeout_s=timeout_s,
                                   mem_limit_bytes=mem_limit, env=env)
        # One group per workload: nothing is swept (a default sweep, like random-mixed's ws, is fixed
        # by the suite's parameters).
        p = dataclasses.replace(p, swept=(), warmup=warmup)
        if variants:
            cells, _ = planning.with_variants(list(p.cells), variants)
            p = dataclasses.replace(p, cells=tuple(cells))
        if reference:
            p = dataclasses.replace(p, reference=planning.reference_cell())
        spec = spec_for(p, noise=noise, env=env, variants=variant_report)
        print(f"memsleuth: suite {k + 1}/{len(workloads.SUITE)}: {w.name} "
              f"({', '.join(options) or 'defaults'}), {time.monotonic() - t0:.0f} s elapsed", file=sys.stderr,
              flush=True)
        outcome = measure(store, p, kind="workload", name=w.name, spec=spec, allocs=allocs,
                          announce=f"{len(p.cells)} cells, {p.rounds.describe()}")
        runs.append(store.load_run(outcome.run_id))
        if outcome.interrupted:
            return runs, True
    return runs, False
