"""`memsleuth gate`: a baseline and a candidate measured in one session, round by round, and
gated on time (paired, CPU by default) and on counts load does not move; the exit code is the gate."""
from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from memsleuth.measure import allocators, plan as planning, workloads
from memsleuth.analysis import gate as gating
from memsleuth.commands import options
from memsleuth.errors import UsageError
from memsleuth.units import parse_fraction

if TYPE_CHECKING:
    from rich.console import Console

NAME = "gate"
DEFAULT_MIN_ROUNDS = 6
DEFAULT_MAX_ROUNDS = 30
SIDES = ("baseline", "candidate")


def add_arguments(g) -> None:
    g.description = (
        "Measure a baseline and a candidate alternately in one session (two commands, two builds, two library "
        "paths, two environments or two allocators) and gate on the change: time as the paired per-round ratio, "
        "with rounds added until its 95% CI resolves the threshold; page faults, memory syscalls and resident "
        "memory beyond the runs' own spread. Exit 0: pass; 1: a regression; 5: time unresolved; 2, 3, 4, 130 as "
        "for every command. The command after -- is shared; --baseline-cmd/--candidate-cmd replace it per side.")
    for side in SIDES:
        g.add_argument(f"--{side}-cmd", metavar="'COMMAND ARGS'", action=options.Once,
                       help=f"the {side}'s command line (split like a shell does; no shell runs it)")
        g.add_argument(f"--{side}-env", metavar="KEY=VALUE", action="append",
                       help=f"set in the {side}'s processes only (LD_LIBRARY_PATH, tunables, options); repeatable")
        g.add_argument(f"--{side}-alloc", metavar="NAME|NAME=PATH.so", action=options.Once,
                       help=f"the {side}'s allocator (default glibc)")
    g.add_argument("--workload", metavar="NAME", action=options.Once,
                   help="a built-in workload instead of a command: " + ", ".join(sorted(workloads.WORKLOADS)))
    g.add_argument("--param", metavar="KEY=VALUE", action="append", help="a workload parameter (one value)")
    g.add_argument("--threshold", metavar="PCT", default="5%", action=options.Once,
                   help="time: a regression when the paired CI lies wholly above +PCT, a pass when wholly below "
                        "(default 5%%)")
    g.add_argument("--count-threshold", metavar="PCT", default="10%", action=options.Once,
                   help="counts (faults, syscalls, RSS): called beyond this change and beyond the runs' spread "
                        "(default 10%%)")
    g.add_argument("--time", choices=gating.TIME_ESTIMATORS, default="cpu", action=options.Once,
                   help="cpu (user + system, default: waiting for a busy core does not count) or wall (for programs "
                        "whose time is waiting)")
    g.add_argument("--min-rounds", metavar="N", action=options.Once,
                   help=f"at least N rounds (default {DEFAULT_MIN_ROUNDS}: the fewest with a 95%% CI)")
    g.add_argument("--max-rounds", metavar="N", action=options.Once,
                   help=f"at most N rounds; then an unresolved time is reported as such (default {DEFAULT_MAX_ROUNDS})")
    g.add_argument("--released-bytes", action=options.OnceFlag,
                   help="also gate the bytes given back by munmap, brk and madvise: records the calls' arguments in "
                        "every run, which adds ~1-2 us per such call to both sides")
    options.add_env(g)
    options.add_limits(g)
    options.add_store(g)
    options.add_machine_label(g)
    g.add_argument("--md", metavar="FILE", action=options.Once,
                   help="also write the gate's summary as Markdown (a pull-request comment)")
    g.add_argument("--junit", metavar="FILE", action=options.Once,
                   help="also write the checks as JUnit XML (one test case per check, for CI test reports)")
    g.add_argument("--json", metavar="FILE", action=options.Once, help="also write the checks as JSON")


def _side_cells(args, command: list[str] | None, env: dict[str, str]) -> list[planning.Cell]:
    from memsleuth.records.model import VARIANT_KEY
    base_params: dict = {}
    if args.workload:
        if command or args.baseline_cmd or args.candidate_cmd:
            raise UsageError("give either --workload or commands (after -- or --baseline-cmd/--candidate-cmd), not both")
        w = workloads.get(args.workload)
        values = {k: v for k, v in w.defaults().items() if v is not None}
        for key, vals in planning.parse_param_options(w, args.param or []).items():
            if len(vals) > 1:
                raise UsageError(f"--param {key}: the gate compares one setup, give one value")
            values[key] = vals[0]
        if w.validate:
            w.validate(values)
        shared = list(w.argv(values))
        base_params = dict(values)
        oom = w.oom_exit_code
    else:
        if args.param:
            raise UsageError("--param sets a workload's parameters: give --workload, or write the values into the "
                             "commands")
        shared, oom = command, None
    cells = []
    for side in SIDES:
        text = getattr(args, f"{side}_cmd")
        if text is not None:
            try:
                argv = shlex.split(text)
            except ValueError as e:
                raise UsageError(f"--{side}-cmd {text!r}: {e}") from None
            if not argv:
                raise UsageError(f"--{side}-cmd is empty")
        elif shared:
            argv = shared
        else:
            raise UsageError(f"no command for the {side}: give one after -- (shared), --{side}-cmd, or --workload")
        if not args.workload:
            options.check_command(argv)
        side_env = dict(env)
        side_env.update(planning.parse_env_options(getattr(args, f"{side}_env") or []))
        alloc = allocators.resolve(getattr(args, f"{side}_alloc") or "glibc")
        if len(alloc) != 1:
            raise UsageError(f"--{side}-alloc takes one allocator")
        cells.append(planning.Cell(alloc[0], {**base_params, VARIANT_KEY: side}, tuple(argv), side_env,
                                   oom_exit_code=oom))
    a, b = cells
    if a.command == b.command and a.env == b.env and a.allocator.path == b.allocator.path:
        import sys
        print("memsleuth: note: the baseline and the candidate are the same setup (an A/A run: how often the gate "
              "calls a change that is not there)", file=sys.stderr)
    return cells


def run(args, command: list[str] | None, console: Console) -> int:
    import sys
    from memsleuth.errors import EXIT_REGRESSION, EXIT_OK, EXIT_UNRESOLVED, interrupted_exit
    from memsleuth.report import junit, terminal
    from memsleuth.report.builders import gate as gate_report
    from memsleuth.session import measure, redacted, result_code, spec_for, write_report_files
    from memsleuth.records.store import Store
    options.apply_machine_label(args)
    for path, what in ((args.md, "--md"), (args.junit, "--junit"), (args.json, "--json")):
        options.writable_output(path, what)
    threshold = parse_fraction(args.threshold, "--threshold")
    count_threshold = parse_fraction(args.count_threshold, "--count-threshold")
    lo = options.count(args.min_rounds, "--min-rounds") if args.min_rounds else DEFAULT_MIN_ROUNDS
    hi = options.count(args.max_rounds, "--max-rounds") if args.max_rounds else max(DEFAULT_MAX_ROUNDS, lo)
    if hi < lo:
        raise UsageError(f"--max-rounds ({hi}) must not be below --min-rounds ({lo})")
    env = options.env(args)
    cells = _side_cells(args, command, env)
    estimator = args.time

    def settled(by_round) -> bool:
        return gating.resolved(by_round[0], by_round[1], estimator, threshold)

    kind = "workload" if args.workload else "command"
    name = args.workload or cells[1].command[0]
    p = planning.Plan(kind, name, tuple(cells), (), planning.Rounds(lo, hi, None), 1,
                      options.timeout(args.timeout), options.mem_limit(args.mem_limit),
                      syscall_args=bool(args.released_bytes), settled=settled, rounds_count=True)
    store = Store(args.db)
    spec = spec_for(p, rounds=f"gate: rounds until the paired {estimator} time resolves ±{threshold:.0%} ({lo}..{hi})",
                    noise=threshold, env=env, command=list(cells[1].command) if kind == "command" else None,
                    gate={"time": estimator, "threshold": threshold, "count_threshold": count_threshold})
    outcome = measure(store, p, kind=kind, name=name, spec=spec,
                      allocs=list({c.allocator.name: c.allocator for c in cells}.values()),
                      announce=f"gate: baseline vs candidate, {lo}..{hi} interleaved rounds + 1 warm-up each")
    run = store.load_run(outcome.run_id)
    result = gating.evaluate(run, estimator, threshold, count_threshold)
    report = gate_report.build(run, result, redacted(sys.argv))
    terminal.render(report, console)
    if args.junit:
        from memsleuth.report.output import say_written, write_text
        write_text(args.junit, junit.render(result.checks, suite=f"memsleuth gate (run {run.id})"), "the JUnit XML")
        say_written("JUnit XML", args.junit)
    write_report_files(report, args, gate_report.to_dict(run, result))
    if outcome.interrupted:
        return interrupted_exit(outcome.signum)
    code = result_code(run, False)
    if code != EXIT_OK:
        return code
    return {gating.REGRESSION: EXIT_REGRESSION, gating.UNRESOLVED: EXIT_UNRESOLVED}.get(result.verdict, EXIT_OK)

