"""`memsleuth fleet submit|status|collect`: one comparison on several machine types through Slurm
(docs/fleet.md; the Slurm side is memsleuth.fleet)."""
from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from memsleuth.textsafe import safe_text

from memsleuth.measure import fleet
from memsleuth.commands import options
from memsleuth.errors import EXIT_NO_RESULT, EXIT_OK, UsageError

if TYPE_CHECKING:
    from rich.console import Console

NAME = "fleet"
MEASURING = ("compare", "case", "check")


def add_arguments(f) -> None:
    f.description = "Run one comparison per machine type on a Slurm cluster and gather the results."
    sub = f.add_subparsers(dest="fleet_command", parser_class=type(f))
    s = sub.add_parser("submit", help="submit a compare or case to Slurm, one array task per machine type")
    s.add_argument("--partition", metavar="P1,P2", action=options.Once,
                   help="the target partitions, one task each (or, with --constraint/--nodelist, the one partition)")
    s.add_argument("--constraint", metavar="C1,C2", action=options.Once, help="target node features, one task each")
    s.add_argument("--nodelist", metavar="N1;N2", action=options.Once,
                   help="target node lists, one task each, separated by ';'")
    s.add_argument("--results", metavar="DIR", action=options.Once,
                   help="where the tasks' stores, logs and the sbatch script go (default memsleuth-fleet-TIME)")
    s.add_argument("--db", metavar="URL", action=options.Once,
                   help="a postgresql:// URL the tasks write to directly (default: one SQLite file per task in "
                        "--results, merged by collect)")
    s.add_argument("--time", metavar="LIMIT", action=options.Once, help="sbatch --time, per task")
    s.add_argument("--account", metavar="NAME", action=options.Once, help="sbatch --account")
    s.add_argument("--qos", metavar="NAME", action=options.Once, help="sbatch --qos")
    s.add_argument("--sbatch-option", metavar="OPT", action="append", default=[],
                   help="any other sbatch option, written into the script as given (repeatable), like --mem=8G")
    s.add_argument("what", nargs=argparse.REMAINDER, metavar="compare|case|check ARGS",
                   help="the memsleuth command each task runs, with its options")
    st = sub.add_parser("status", help="each task's state (sacct, else scontrol, else the task's own marker)")
    st.add_argument("job", metavar="JOB|DIR")
    options.add_report_files(st)
    c = sub.add_parser("collect", help="merge every task's results into the store; failed tasks are recorded as such")
    c.add_argument("job", metavar="JOB|DIR")
    c.add_argument("--wait", action=options.OnceFlag, help="wait until every task has ended")
    c.add_argument("--timeout", metavar="SECONDS", default="3600", action=options.Once,
                   help="with --wait: give up after this long (default 3600)")
    options.add_store(c)


def run(args, command, console: Console) -> int:
    if args.fleet_command == "submit":
        return _submit(args, command, console)
    if command:
        raise UsageError("only `fleet submit` takes a command after --")
    if args.fleet_command == "status":
        return _status(args, console)
    if args.fleet_command == "collect":
        return _collect(args, console)
    raise UsageError("fleet needs submit, status or collect (see `memsleuth fleet --help`)")


def _submit(args, command, console: Console) -> int:
    from memsleuth.records.store import Store, is_url
    what = list(args.what)
    if not what or what[0] not in MEASURING:
        raise UsageError("fleet submit needs the memsleuth command the tasks run after its own options: compare, "
                         "case or check, like: memsleuth fleet submit --partition a,b compare --alloc glibc,mimalloc")
    for banned in ("--db", "--machine-label"):
        if any(a == banned or a.startswith(banned + "=") for a in what):
            raise UsageError(f"leave {banned} out of the task's command: fleet sets it per task "
                             + ("(give fleet submit --db for PostgreSQL)" if banned == "--db" else "(the target's name)"))
    # The task's command must parse here: a typo is refused now, not in every task an hour later.
    try:
        args.build_parser().parse_args(what)
    except UsageError as e:
        raise UsageError(f"the task's command does not parse: {str(e).split(' (see ')[0]}") from None
    except SystemExit:
        raise UsageError(f"the task's command does not parse: {' '.join(what)}") from None
    if command is not None and what[0] == "case":
        raise UsageError("a case takes no command after --")
    if command is None and what[0] == "check":
        raise UsageError("check needs the program to explain after --, like: ... check -- ./my-benchmark")
    if args.db and not is_url(args.db):
        raise UsageError("fleet submit --db takes a postgresql:// URL (SQLite files are written per task and merged "
                         "by `fleet collect --db FILE`)")
    if args.db:
        Store(args.db).close()   # reachable, and a memsleuth store (or empty), before anything is submitted
    targets, shared = fleet.targets_from(args.partition, args.constraint, args.nodelist)
    sbatch = [f"--time={args.time}"] if args.time else []
    sbatch += [f"--account={args.account}"] if args.account else []
    sbatch += [f"--qos={args.qos}"] if args.qos else []
    for opt in args.sbatch_option:
        if not opt.startswith("--") or "\n" in opt:
            raise UsageError(f"bad --sbatch-option {opt!r}: give one long option like --mem=8G")
        sbatch.append(opt)
    results = Path(args.results or f"memsleuth-fleet-{datetime.now().strftime('%Y%m%d-%H%M%S')}")
    m = fleet.submit(targets, shared, what, command, results, args.db, sbatch)
    console.print(safe_text(f"submitted job {m['job']}: {len(targets)} task(s), one per target: "
                       + ", ".join(f"{i}={t.value}" for i, t in enumerate(targets))))
    console.print(safe_text(f"results land in {m['results']}" + (f" and in {m['db']}" if m["db"] else "")
                       + f"; then: memsleuth fleet status {m['job']}; memsleuth fleet collect {m['job']} --wait"))
    return EXIT_OK


def _show_states(manifest: dict, st: list[fleet.TaskState], console: Console, args=None) -> None:
    from memsleuth.report import terminal
    from memsleuth.report.builders import fleet_status
    report = fleet_status.build(manifest["job"], manifest["results"], st)
    terminal.render(report, console)
    if args is not None:
        from memsleuth.session import write_report_files
        write_report_files(report, args, fleet_status.document(manifest["job"], manifest["results"], st))


def _status(args, console: Console) -> int:
    options.writable_output(args.md, "--md")
    options.writable_output(args.json, "--json")
    manifest = fleet.load(args.job)
    _show_states(manifest, fleet.states(manifest), console, args)
    return EXIT_OK


def _collect(args, console: Console) -> int:
    from memsleuth.records.store import Store
    from memsleuth import __version__
    from memsleuth.records.model import MachineInfo, RunSpec
    manifest = fleet.load(args.job)
    timeout = options.timeout(args.timeout) or float("inf")
    st = fleet.wait(manifest, timeout) if args.wait else fleet.states(manifest)
    target = Store(args.db)
    results = Path(manifest["results"])
    merged: list[int] = []
    pending = [s for s in st if s.state not in fleet.DONE]
    for s in st:
        if s.state not in fleet.DONE:
            continue
        db = results / f"task-{s.index}.db"
        if db.exists():
            src = Store(db, readonly=True)
            # The task has ended: a run it left marked running was interrupted, whatever host reads it.
            new, _, _, damaged = target.merge_from(src, writers_gone=True)
            merged += new
            for line in damaged:
                console.print(safe_text(f"task {s.index} ({s.target}): {line}"))
            src.close()
        if s.state != "COMPLETED":
            # The task itself as a failed run: its Slurm state and log tail, kept with the results.
            u = fleet.failed_task_uuid(manifest["job"], s.index)
            if not target.has_run_uuid(u):
                facts = {"slurm_job": f"{manifest['job']}_{s.index}", "slurm_state": s.state, "exit_code": s.exit_code,
                         "partition": s.partition, "node": s.node, "log_tail": fleet.log_tail(manifest, s.index)}
                rid = target.begin_run(kind="fleet-task", name=s.target, argv=["memsleuth", *manifest["argv"]],
                                       spec=RunSpec(facts=facts), machine=MachineInfo(hostname=s.node or None,
                                                                                      label=s.target),
                                       version=__version__, run_uuid=u)
                target.finish_run(rid, "failed")
                console.print(safe_text(f"task {s.index} ({s.target}): Slurm state {s.state}, exit {s.exit_code}; recorded "
                                   f"as failed run {rid}. Log tail:\n{facts['log_tail']}"))
    _show_states(manifest, st, console)
    if merged:
        console.print(safe_text(f"merged {len(merged)} run(s) into {target.path}: " + ", ".join(map(str, merged))
                           + f". Side by side: memsleuth show {' '.join(map(str, merged))} --db {target.path}"))
    else:
        console.print(safe_text(f"no new runs for {target.path}"))
    if pending:
        console.print(safe_text(f"{len(pending)} task(s) not ended yet: collect again later (or with --wait)"))
        return EXIT_NO_RESULT
    return EXIT_OK
