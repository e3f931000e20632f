"""`memsleuth case NAME`: a seed case study, measured and explained from its evidence."""
from __future__ import annotations

from rich.table import Table
from typing import TYPE_CHECKING

from memsleuth.measure import allocators
from memsleuth.commands import options
from memsleuth.errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console

NAME = "case"


def add_arguments(cs) -> None:
    cs.description = ("Run a case study: its question, its measurements with units, and what the evidence shows. "
                      "`memsleuth case --list` names them; docs/cases.md explains each.")
    cs.add_argument("name", nargs="?", metavar="NAME", help="the case to run")
    cs.add_argument("--list", action=options.OnceFlag, help="list the cases, one line each")
    cs.add_argument("--param", metavar="KEY=VALUE", action="append",
                    help="case parameter; list parameters take V1,V2 (see --list for the names)")
    cs.add_argument("--alloc", metavar="LIST", action=options.Once,
                    help="comma-separated names or NAME=PATH.so (default: the case's own, those installed)")
    cs.add_argument("--reps", metavar="N", action=options.Once, help="interleaved rounds (default: the case's own)")
    options.add_measuring(cs, env=False, reference=True, pprof=False)


def run(args, command, console: Console) -> int:
    from memsleuth.session import finish, measure, spec_for
    from memsleuth.records.store import Store
    from memsleuth import cases
    if args.list:
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
    options.apply_machine_label(args)
    options.writable_output(args.md, "--md")
    options.writable_output(args.json, "--json")
    options.writable_output(args.html, "--html")
    values = case.parse_params(args.param or [])
    reps = options.count(args.reps, "--reps") if args.reps is not None else case.default_reps
    timeout = options.timeout(args.timeout)
    mem_limit = options.mem_limit(args.mem_limit)
    if args.alloc is not None:
        allocs = allocators.resolve(args.alloc)
    else:
        found = allocators.available()
        allocs = found if case.default_allocators is None else [a for a in found if a.name in case.default_allocators]
    facts = case.prepare(values)
    p = cases.case_plan(case, case.variants(values, facts), allocs, reps=reps, timeout_s=timeout,
                        mem_limit_bytes=mem_limit)
    p = options.with_reference(p, args)
    store = Store(args.db)
    spec = spec_for(p, reps=reps, min_reps=None, max_reps=None, case=case.name,
                    case_params={k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}, facts=facts)
    warm = f" + {p.warmup} warm-up" if p.warmup else ""
    outcome = measure(store, p, kind="case", name=case.name, spec=spec, allocs=allocs,
                      announce=f"case {case.name}: {len(p.cells)} cells x {reps} rounds{warm}")
    return finish(store, outcome, args, console)
