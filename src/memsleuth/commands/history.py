"""`memsleuth history`: the stored runs, one line each."""
from __future__ import annotations

from typing import TYPE_CHECKING

from memsleuth.commands import options

if TYPE_CHECKING:
    from rich.console import Console

NAME = "history"


def add_arguments(h) -> None:
    options.add_store(h)
    h.add_argument("--trend", action=options.OnceFlag,
                   help="per cell and metric (time, page faults, memory syscalls, RSS), the values over the stored "
                        "runs and the runs where a step happened (change points, docs/ci.md)")
    h.add_argument("--name", metavar="NAME", action=options.Once,
                   help="--trend: only runs of this workload, case or program")
    h.add_argument("--last", metavar="N", default="50", action=options.Once,
                   help="--trend: the latest N complete runs (default 50)")
    h.add_argument("--threshold", metavar="PCT", default="5%", action=options.Once,
                   help="--trend: report time steps from this size (default 5%%)")
    h.add_argument("--count-threshold", metavar="PCT", default="10%", action=options.Once,
                   help="--trend: report count steps from this size (default 10%%)")
    h.add_argument("--md", metavar="FILE", action=options.Once, help="also write the list (or the trend) as Markdown")
    h.add_argument("--json", metavar="FILE", action=options.Once, help="also write the list of runs as JSON")
    h.add_argument("--html", metavar="FILE", action=options.Once,
                   help="--trend: also write it as one self-contained HTML file with a plot per series")


def run(args, command, console: Console) -> int:
    from memsleuth.errors import UsageError
    from memsleuth.records.store import Store
    from memsleuth.report import terminal
    from memsleuth.report.builders import history as history_report
    from memsleuth.session import write_report_files
    trend_only = [o for o, v in (("--name", args.name), ("--html", args.html)) if v]
    if args.trend:
        if args.json:
            raise UsageError("--json writes the list of runs; with --trend, --md and --html write the trend")
        return _trend(args, console)
    if trend_only:
        raise UsageError(f"{trend_only[0]} goes with --trend")
    options.writable_output(args.md, "--md")
    options.writable_output(args.json, "--json")
    store = Store(args.db, readonly=True)
    runs = store.list_runs()
    report = history_report.build(runs, str(store.path))
    terminal.render(report, console)
    write_report_files(report, args, history_report.document(runs, str(store.path)))
    return 0


def _trend(args, console: Console) -> int:
    import sys
    from memsleuth.analysis import trend
    from memsleuth.report import terminal
    from memsleuth.report.builders import trend as trend_report
    from memsleuth.session import redacted, write_formats
    from memsleuth.records.store import Store
    from memsleuth.units import parse_fraction
    options.writable_output(args.md, "--md")
    options.writable_output(args.html, "--html")
    last = options.count(args.last, "--last")
    threshold = parse_fraction(args.threshold, "--threshold")
    count_threshold = parse_fraction(args.count_threshold, "--count-threshold")
    store = Store(args.db, readonly=True)
    chosen = [r for r in store.list_runs() if r.status == "complete" and (args.name is None or r.name == args.name)]
    runs = [store.load_run(r.id) for r in chosen[-last:]]
    report = trend_report.build(trend.series(runs, threshold, count_threshold), len(runs), redacted(sys.argv),
                                threshold, count_threshold)
    terminal.render(report, console)
    write_formats(report, args)
    return 0
