"""`memsleuth check -- CMD`: one program, its probe regions, its whole process, the findings."""
from __future__ import annotations

import dataclasses

from rich.console import Console

from memsleuth import allocators, plan as planning
from memsleuth.commands import options
from memsleuth.errors import UsageError
from memsleuth.model import RunSpec

NAME = "check"
HELP = "measure any program, its probe regions, and say what the evidence shows"


def add_arguments(k) -> None:
    k.description = ("Run a program (after --) and report each probe region's evidence, the whole process's, and "
                     "the findings.")
    k.add_argument("--alloc", metavar="NAME", action=options.Once,
                   help="one allocator name or NAME=PATH.so (default glibc)")
    k.add_argument("--reps", metavar="N", default="1", action=options.Once, help="runs (default 1)")
    k.add_argument("--no-where", action=options.OnceFlag,
                   help="skip the call sites (by default one more run under perf record finds where the page "
                        "faults and memory system calls come from)")
    options.add_env(k)
    options.add_limits(k)
    options.add_fail_on_error(k)
    options.add_store(k)
    options.add_machine_label(k)
    options.add_outputs(k)


def run(args, command: list[str] | None, console: Console) -> int:
    from memsleuth.session import finish, measure
    from memsleuth.store import Store
    if not command:
        raise UsageError("check needs a command after --, like: memsleuth check -- ./my-benchmark")
    options.apply_machine_label(args)
    options.writable_output(args.md, "--md")
    options.writable_output(args.json, "--json")
    options.writable_output(args.html, "--html")
    options.check_command(command)
    reps = options.count(args.reps, "--reps")
    env = options.env(args)
    allocs = allocators.resolve(args.alloc or "glibc")
    if len(allocs) != 1:
        raise UsageError("check runs one allocator: give one name to --alloc (compare several with `compare`)")
    p = planning.command_plan(command, allocs, rounds=planning.Rounds.fixed(reps), warmup=0,
                              timeout_s=options.timeout(args.timeout), mem_limit_bytes=options.mem_limit(args.mem_limit),
                              env=env)
    # check explains: the syscalls' arguments (bytes, advice, the break's moves) are recorded.
    p = dataclasses.replace(p, syscall_args=True, where=not args.no_where, explain_if_needed=True)
    store = Store(args.db)
    spec = RunSpec(rounds=p.rounds.describe(), warmup=0, timeout_s=p.timeout_s, mem_limit_bytes=p.mem_limit_bytes,
                   command=command, env=env)
    outcome = measure(store, p, kind="check", name=command[0], spec=spec, allocs=allocs)
    return finish(store, outcome, args, console)
