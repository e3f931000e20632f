"""`memsleuth check -- CMD`: one program, its probe regions, its whole process, the findings."""
from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING

from memsleuth.measure import allocators, plan as planning
from memsleuth.commands import options
from memsleuth.errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console

NAME = "check"


def add_arguments(k) -> None:
    k.description = ("Run a program (after --) and report each probe region's evidence, the whole process's, and "
                     "the findings.")
    k.add_argument("--alloc", metavar="NAME", action=options.Once,
                   help="one allocator name or NAME=PATH.so (default: the one the program mallocs from, glibc or "
                        "an allocator it links itself)")
    k.add_argument("--reps", metavar="N", default="1", action=options.Once, help="runs (default 1)")
    k.add_argument("--verbose", action=options.OnceFlag,
                   help="also say on stderr where this command's time went: the measured runs, the explaining run, "
                        "symbolization, perf's fallback, the analysis and the report (the JSON has them as 'timings')")
    k.add_argument("--no-where", action=options.OnceFlag,
                   help="skip the call sites (by default the explaining run samples where the page faults and "
                        "memory system calls come from; it still runs, for the syscalls' arguments and the heap)")
    k.add_argument("--try", dest="try_", action=options.OnceFlag,
                   help="then measure the changes the findings advise (tunables, allocator options, other allocators) "
                        "against the program as it ran, alternately in one session, and say which help (docs/ci.md)")
    k.add_argument("--try-budget", metavar="SECONDS", action=options.Once,
                   help="--try: at most this long for the candidates' session (default: 20 times the program's "
                        "time, at least 60 s); the plan is said first, and candidates or rounds that do not fit are "
                        "left out and named")
    k.add_argument("--try-rounds", metavar="N", default="20", action=options.Once,
                   help="--try: at most N rounds (default 20; at least 6)")
    k.add_argument("--pid", metavar="PID", action="append",
                   help="measure a process that is already running (every thread, and the threads and processes it "
                        "creates) for a window, then detach; give it several times for several processes")
    k.add_argument("--duration", metavar="SECONDS", action=options.Once,
                   help="--pid: the window (default: until Ctrl-C)")
    options.add_measuring(k)


def run(args, command: list[str] | None, console: Console) -> int:
    if not command and not args.pid:
        raise UsageError("check needs a command after --, like: memsleuth check -- ./my-benchmark "
                         "(or --pid PID for a process that is already running)")
    options.apply_machine_label(args)
    options.writable_output(args.md, "--md")
    options.writable_output(args.json, "--json")
    options.writable_output(args.pprof, "--pprof")
    options.writable_output(args.speedscope, "--speedscope")
    options.writable_output(args.html, "--html")
    if args.pid or args.duration is not None:
        return _attach(args, command, console)
    options.check_command(command)
    reps = options.count(args.reps, "--reps")
    env = options.env(args)
    allocs = allocators.resolve(args.alloc or "glibc")
    if len(allocs) != 1:
        raise UsageError("check runs one allocator: give one name to --alloc (compare several with `compare`)")
    try_rounds = options.count(args.try_rounds, "--try-rounds")
    if try_rounds < 6:
        raise UsageError("--try-rounds must be at least 6 (the fewest rounds with a 95% CI)")
    budget = options.duration(args.try_budget, "--try-budget") if args.try_budget is not None else None
    if budget is not None and not args.try_:
        raise UsageError("--try-budget goes with --try")
    timeout, mem_limit = options.timeout(args.timeout), options.mem_limit(args.mem_limit)
    p = planning.command_plan(command, allocs, rounds=planning.Rounds.fixed(reps), warmup=0, timeout_s=timeout,
                              mem_limit_bytes=mem_limit, env=env, stdin=options.command_input())
    return _measure(args, command, console, p, allocs, env, try_rounds, budget)


def _measure(args, command: list[str], console: Console, p: planning.Plan, allocs: list, env: dict,
             try_rounds: int, budget: float | None) -> int:
    """check's runs of its plan (and --try's), then the report."""
    if args.alloc is None:     # the program as it runs: under the allocator it links, if it links one
        own = _linked_allocator(p.cells[0])
        if own is not None:
            allocs = [own]
            p = dataclasses.replace(p, cells=(dataclasses.replace(p.cells[0], allocator=own),))
    # check explains: the syscalls' arguments (bytes, advice, the break's moves) are recorded.
    p = dataclasses.replace(p, syscall_args=True, where=not args.no_where, explain_if_needed=True, heap=True)
    from memsleuth.measure import machine
    machine.calibrate_soon()     # beside the imports below, not after them
    from memsleuth.session import finish, measure, spec_for
    from memsleuth.records.store import Store
    store = Store(args.db)
    spec = spec_for(p, min_reps=None, max_reps=None, command=command, env=env)
    outcome = measure(store, p, kind="check", name=command[0], spec=spec, allocs=allocs)
    code = finish(store, outcome, args, console)
    if not args.try_ or outcome.interrupted or code != 0:
        return code
    return _try(store, outcome.run_id, p, args, console, try_rounds, budget) or code


def _linked_allocator(cell: planning.Cell) -> allocators.Allocator | None:
    """The allocator the command brings itself, when its malloc binds there and not to glibc's (a
    server linking libjemalloc ahead of libc, a program defining malloc itself): `check` without
    --alloc then runs it as it is and names that one (said on stderr), where the glibc cell would fail
    its preload check. None when malloc is glibc's, or the check could not tell."""
    import sys
    from memsleuth.measure import launcher
    c = launcher.check_preload(cell)
    obj = c.get("malloc_object")
    if not c.get("checked") or c.get("preload_ok") is not False or not obj:
        return None
    own = allocators.linked_by_program(obj)
    print(f"memsleuth: malloc in {cell.command[0]} binds to {obj}, not glibc's: the program brings its own "
          f"allocator, so it is checked as it runs, under {own.name} (--alloc runs it under another)",
          file=sys.stderr, flush=True)
    return own


def _attach(args, command: list[str] | None, console: Console) -> int:
    """check --pid: a window on running processes (attach.py), reported as any check."""
    import sys
    from memsleuth.measure import attach
    import signal
    from memsleuth.errors import EXIT_NO_RESULT, interrupted_exit, stop_signal
    from memsleuth.measure.launcher import STOP_SIGNALS
    from memsleuth.session import emit, redacted
    from memsleuth.records.store import Store
    if not args.pid:
        raise UsageError("--duration is the window of --pid: give the process with --pid PID")
    if command:
        raise UsageError("check --pid measures a process that is already running: leave out the command after --")
    if args.try_ or args.try_budget is not None:
        raise UsageError("--try measures changes by running the program again: it cannot apply to --pid")
    for given, name, why in ((args.alloc, "--alloc", "its allocator is the one it runs with"),
                             (args.env, "--env", "its environment is the one it started with"),
                             (args.reps != "1", "--reps", "it is measured once, for the window")):
        if given:
            raise UsageError(f"{name} does not apply to --pid: the process is already running ({why})")
    pids = [options.pid(p) for p in args.pid]
    duration = options.duration(args.duration) if args.duration is not None else None
    pids = attach.validate(pids)
    store = Store(args.db)
    try:
        run_id, stopped_by = attach.run(store, pids, duration, redacted(sys.argv))
    finally:            # the window is stored (or failed): a signal held meanwhile may now end the report
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    try:
        run = store.load_run(run_id)
        emit(run, args, console)
    except KeyboardInterrupt as e:
        print(f"memsleuth: interrupted: the window is stored as run {run_id} (memsleuth show {run_id} --db "
              f"{store.path})", file=sys.stderr)
        return interrupted_exit(stop_signal(e))
    if run.status == "failed":       # the window measured nothing: said first in the report, and here
        return EXIT_NO_RESULT
    if stopped_by is None or (stopped_by == signal.SIGINT and not duration):   # Ctrl-C ends a window without one
        return 0
    return interrupted_exit(stopped_by)


def _try(store, check_run: int, p, args, console: Console, max_rounds: int, budget: float | None) -> int | None:
    """check --try: the findings' candidates against the baseline, in one session."""
    from memsleuth.analysis import gate as gating, tried
    from memsleuth.analysis.summary import analyse_check
    from memsleuth.analysis import tries
    from memsleuth.report import builders, terminal
    from memsleuth.session import measure, spec_for
    run = store.load_run(check_run)
    checked = analyse_check(run)
    found = checked.findings
    base = p.cells[0]
    # Another allocator cannot reach a program that LD_PRELOAD does not (a static executable).
    installed = [a.name for a in allocators.available()] if checked.view.preload_reaches_program is not False else []
    if base.allocator.source == "program":     # its own malloc shadows glibc's, and glibc's cell preloads nothing
        installed = [n for n in installed if n != "glibc"]
    candidates = tries.for_findings(found, base.allocator.name, installed, list(base.command),
                                    (run.machine.mem_total_kb or 0) * 1024 if run.machine else None)
    if not candidates:
        console.print("\n--try: no finding of this run names a setting or an allocator to try; the advice above is a "
                      "change to the program itself.", markup=False, highlight=False)
        return None
    import sys
    run_s = tries.program_seconds(checked.measured)
    budget = budget if budget is not None else tries.default_budget(run_s)
    candidates, left_out, max_rounds = tries.fit(candidates, run_s, budget, max_rounds)
    per_round = (1 + len(candidates)) * (run_s + tries.RUN_OVERHEAD_S)
    least, most = per_round * (tries.MIN_ROUNDS + 1), per_round * (max_rounds + 1)
    span = (f"{max_rounds} rounds: about {most:.0f} s" if max_rounds == tries.MIN_ROUNDS else
            f"{tries.MIN_ROUNDS} to {max_rounds} rounds: about {least:.0f} s to {most:.0f} s")
    print(f"memsleuth: --try plan, within {budget:.0f} s: the baseline and {len(candidates)} candidate(s) ("
          + "; ".join(f"{t.name}, for {t.finding}" for t in candidates) + f"), each run about {run_s:.1f} s, "
          + span if candidates else
          f"memsleuth: --try: no candidate fits {budget:.0f} s ({tries.MIN_ROUNDS} rounds of the baseline and one "
          f"candidate, each run about {run_s:.1f} s): raise --try-budget", file=sys.stderr, flush=True)
    if left_out:
        print("memsleuth: --try: left out, over the budget: " + ", ".join(t.name for t in left_out),
              file=sys.stderr, flush=True)
    if not candidates:
        return None
    cells = [dataclasses.replace(base, params={"variant": "baseline"}, where=False)]
    for t in candidates:
        cells.append(_candidate_cell(base, t))
    plan = planning.Plan("command", p.name, tuple(cells), (), planning.Rounds(6, max_rounds, None), 1, p.timeout_s,
                         p.mem_limit_bytes, settled=tried.settled("cpu", gating.DEFAULT_TIME_THRESHOLD),
                         rounds_count=True)
    spec = spec_for(plan, rounds=f"--try: rounds until every candidate's paired CPU time resolves ±5% (6..{max_rounds})",
                    command=list(base.command), env=dict(base.env),
                    facts={"tries": [t.to_dict() for t in candidates], "check_run": check_run},
                    gate={"time": "cpu", "threshold": gating.DEFAULT_TIME_THRESHOLD,
                          "count_threshold": gating.DEFAULT_COUNT_THRESHOLD})
    allocs = list({c.allocator.name: c.allocator for c in cells}.values())
    outcome = measure(store, plan, kind="try", name=p.name, spec=spec, allocs=allocs,
                      announce=f"--try: {len(candidates)} candidate(s) against the baseline, 6..{max_rounds} rounds")
    console.print()
    terminal.render(builders.for_run(store.load_run(outcome.run_id)), console)
    return 130 if outcome.interrupted else None


def _candidate_cell(base: planning.Cell, t) -> planning.Cell:
    from memsleuth.analysis import tries
    env = dict(base.env)
    if t.tunables:
        own = env.get("GLIBC_TUNABLES")
        env["GLIBC_TUNABLES"] = ":".join(([own] if own else []) + list(t.tunables))
    for k, v in t.env.items():    # a runtime's options variable keeps the program's own options, the try's last
        own = env.get(k, os.environ.get(k)) if k in tries.OPTIONS_VARIABLES else None
        env[k] = f"{own} {v}" if own else v
    alloc = allocators.resolve(t.allocator)[0] if t.allocator else base.allocator
    return dataclasses.replace(base, allocator=alloc, env=env, params={"variant": t.name}, where=False)
