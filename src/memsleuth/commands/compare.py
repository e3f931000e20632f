"""`memsleuth compare`: allocators on a built-in workload, or on any command after --."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from memsleuth.measure import allocators, plan as planning, workloads
from memsleuth.commands import options
from memsleuth.errors import UsageError
from memsleuth.measure.workloads import SUITE_REPS
from memsleuth.units import parse_fraction

if TYPE_CHECKING:
    from rich.console import Console

NAME = "compare"


def add_arguments(c) -> None:
    c.description = "Compare allocators on a built-in workload, or on any command given after --."
    c.add_argument("--workload", metavar="NAME", action=options.Once,
                   help="built-in workload (default: random-mixed): " + ", ".join(sorted(workloads.WORKLOADS)))
    c.add_argument("--suite", nargs="?", const="workloads", choices=SUITES, action=options.Once,
                   help=f"run a suite, one stored run each, then one summary table (default {SUITE_REPS} rounds "
                        f"each): 'workloads' (the default) the {len(workloads.SUITE)} allocator workloads with their "
                        "suite parameters (docs/workloads.md); 'apps' the real applications installed (a key-value "
                        "server, an embedded database, two interpreters, a compiler, compressors)")
    c.add_argument("--alloc", metavar="LIST", action=options.Once,
                   help="comma-separated names or NAME=PATH.so (default: all found)")
    c.add_argument("--param", metavar="KEY=V1,V2,...", action="append",
                   help="workload parameter, or for a command a value of its {KEY} placeholder; several values sweep it")
    c.add_argument("--variant", metavar="NAME:KEY=VALUE[,KEY=VALUE...]", action="append",
                   help="also run each allocator it applies to under this environment (tunables, allocator options), "
                        "interleaved like the allocators; repeatable")
    c.add_argument("--metric", metavar="NAME=REGEX[:higher|lower]", action=options.Once,
                   help="a command's own figure, read from its output (the last match of REGEX's first group) "
                        "as the cell's metric; higher is better unless :lower")
    c.add_argument("--reps", metavar="N", action=options.Once,
                   help="run exactly N interleaved rounds (default: adaptive, see --target-ci)")
    c.add_argument("--warmup", metavar="N", action=options.Once,
                   help="unmeasured runs of each cell before the rounds (default 1: caches, page cache and the "
                        "allocator's first growth out of the figures; they count the syscalls by name, which the "
                        "timed rounds do not; 0 for none, and the rounds count them)")
    c.add_argument("--target-ci", metavar="PCT", action=options.Once,
                   help=f"add rounds until each median's 95%% CI half-width is at most this "
                        f"(default {options.DEFAULT_TARGET_CI.replace('%', '%%')})")
    c.add_argument("--min-reps", metavar="N", action=options.Once,
                   help=f"adaptive: at least N rounds (default {options.DEFAULT_MIN_REPS})")
    c.add_argument("--max-reps", metavar="N", action=options.Once,
                   help=f"adaptive: at most N rounds (default {options.DEFAULT_MAX_REPS})")
    c.add_argument("--noise", metavar="PCT", default=options.DEFAULT_NOISE, action=options.Once,
                   help=f"call a difference only when its CI lies beyond this "
                        f"(default {options.DEFAULT_NOISE.replace('%', '%%')})")
    c.add_argument("--where", action=options.OnceFlag,
                   help="explain where the memory system calls come from: record their arguments (bytes, advice, "
                        "the program break's moves) in every run (~1-2 us per such call), and the call sites of faults "
                        "and calls in one more run per cell under perf record; a cell holding 16 MiB or more also gets "
                        "its heap accounted (what its resident memory is made of) in its explaining run")
    options.add_measuring(c, reference=True)


SUITES = ("workloads", "apps")


def run(args, command: list[str] | None, console: Console) -> int:
    options.apply_machine_label(args)
    options.writable_output(args.md, "--md")
    options.writable_output(args.json, "--json")
    options.writable_output(args.pprof, "--pprof")
    options.writable_output(args.speedscope, "--speedscope")
    options.writable_output(args.html, "--html")
    for flag, given in (("--pprof", args.pprof), ("--speedscope", args.speedscope)):
        if given and not args.where:
            raise UsageError(f"{flag} writes the sampled stacks, which compare samples with --where: add --where")
    rounds = options.rounds(args)
    noise = parse_fraction(args.noise, "--noise")
    env = options.env(args)
    timeout = options.timeout(args.timeout)
    mem_limit = options.mem_limit(args.mem_limit)
    warmup = options.warmup(args.warmup)
    metric = planning.MetricSpec.parse(args.metric) if args.metric else None
    if args.suite:
        return _suite(args, command, console, noise, env, timeout, mem_limit, warmup)
    if command:
        if args.workload:
            raise UsageError("give either a workload (--workload) or a command after --, not both")
        options.check_command(command)
        workload = None
    else:
        if metric is not None:
            raise UsageError("--metric reads a command's output: give the command after --")
        workload = workloads.get(args.workload or "random-mixed")
    allocs = allocators.resolve(args.alloc)
    variants = _variants(args)
    if workload is None:
        p = planning.command_plan(command, allocs, rounds=rounds, timeout_s=timeout, mem_limit_bytes=mem_limit,
                                  env=env, param_options=args.param or [], stdin=options.command_input())
        if metric is not None:
            p = dataclasses.replace(p, metric=metric)
    else:
        p = planning.workload_plan(workload, allocs, args.param or [], rounds=rounds, timeout_s=timeout,
                                   mem_limit_bytes=mem_limit, env=env)
    return _measure(args, console, p, allocs, env, command, metric, noise, warmup, variants)


def _measure(args, console: Console, p: planning.Plan, allocs: list, env: dict, command, metric, noise: float,
             warmup: int, variants: list) -> int:
    """compare's runs of its plan, then the report."""
    from memsleuth.records.store import Store
    from memsleuth.session import finish, measure, spec_for
    p = dataclasses.replace(p, warmup=warmup)
    if args.where:
        p = dataclasses.replace(p, syscall_args=True, where=True, heap=True)
    cells, variant_report = planning.with_variants(list(p.cells), variants)
    if variants:
        p = dataclasses.replace(p, cells=tuple(cells))
    p = options.with_reference(p, args)
    store = Store(args.db)
    spec = spec_for(p, noise=noise, env=env, command=command or None, metric=metric.to_dict() if metric else None,
                    variants=variant_report)
    outcome = measure(store, p, kind=p.kind, name=p.name, spec=spec, allocs=allocs,
                      announce=f"{len(p.cells)} cells, {p.rounds.describe()} + {p.warmup} warm-up each")
    return finish(store, outcome, args, console)


def _variants(args) -> list[planning.EnvVariant]:
    variants = [planning.EnvVariant.parse(v) for v in args.variant or []]
    if len({v.name for v in variants}) != len(variants):
        raise UsageError("two --variant options have the same name")
    return variants


def _suite(args, command, console: Console, noise: float, env: dict, timeout, mem_limit, warmup: int) -> int:
    from memsleuth.records.store import Store
    import sys
    from memsleuth.errors import EXIT_INTERRUPTED, EXIT_NO_RESULT, EXIT_OK
    from memsleuth.analysis import suite
    from memsleuth.analysis.summary import analyse_run
    from memsleuth.report import json_export, terminal
    from memsleuth.report.builders import suite as suite_report
    from memsleuth.session import run_suite
    what = ("the real applications with their own inputs and figures" if args.suite == "apps" else
            "the built-in allocator workloads with their own parameters")
    for given, name in ((command, "a command"), (args.workload, "--workload"), (args.param, "--param"),
                        (args.metric, "--metric"), (args.where, "--where")):
        if given:
            raise UsageError(f"--suite runs {what}: leave out {name}")
    if args.reps is None and args.target_ci is None and args.min_reps is None and args.max_reps is None:
        rounds = planning.Rounds.fixed(SUITE_REPS)
    else:
        rounds = options.rounds(args)
    variants = _variants(args)
    allocs = allocators.resolve(args.alloc)
    variant_report = [{"name": v.name, "env": v.env, "skipped": [a.name for a in allocs if not v.applies_to(a.name)]}
                      for v in variants]
    store = Store(args.db)
    skipped: list[tuple[str, str]] = []
    if args.suite == "apps":
        if variants:
            raise UsageError("--variant is for the workload suite: the applications run as they are")
        from memsleuth.session import run_apps
        runs, interrupted, skipped = run_apps(store, allocs, rounds=rounds, noise=noise, env=env, timeout_s=timeout,
                                              mem_limit=mem_limit, reference=not args.no_reference,
                                              warmup=warmup)
    else:
        runs, interrupted = run_suite(store, allocs, rounds=rounds, noise=noise, env=env, timeout_s=timeout,
                                      mem_limit=mem_limit, variants=variants, variant_report=variant_report,
                                      reference=not args.no_reference, warmup=warmup)
    if not runs:
        for name, why in skipped:
            console.print(f"{name}: {why}", markup=False, highlight=False)
        return EXIT_INTERRUPTED if interrupted else EXIT_NO_RESULT
    from memsleuth.session import redacted, write_report_files
    analyses = [analyse_run(r) for r in runs]
    report = suite_report.build(runs, suite.summarise(runs, analyses), redacted(sys.argv), interrupted,
                                apps=args.suite == "apps", skipped=skipped)
    terminal.render(report, console)
    write_report_files(report, args, {"schema": "memsleuth.suite/1", "suite": args.suite,
                                      "skipped": [{"name": n, "why": w} for n, w in skipped],
                                      "runs": [json_export.document(r, a) for r, a in zip(runs, analyses)],
                                      "summary": {"columns": report.tables[0].columns,
                                                  "rows": report.tables[0].rows}})
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_OK
