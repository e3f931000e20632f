"""`memsleuth history`: the stored runs, one line each."""
from __future__ import annotations

import shlex

from rich.console import Console
from rich.table import Table

from memsleuth.textsafe import safe_text

from memsleuth.commands import options

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
    h.add_argument("--md", metavar="FILE", action=options.Once, help="--trend: also write it as Markdown")
    h.add_argument("--html", metavar="FILE", action=options.Once,
                   help="--trend: also write it as one self-contained HTML file with a plot per series")


def run(args, command, console: Console) -> int:
    from memsleuth.records.store import Store
    trend_only = [o for o, v in (("--name", args.name), ("--md", args.md), ("--html", args.html)) if v]
    if args.trend:
        return _trend(args, console)
    if trend_only:
        from memsleuth.errors import UsageError
        raise UsageError(f"{trend_only[0]} goes with --trend")
    store = Store(args.db, readonly=True)
    table = Table(title=safe_text(f"runs in {store.path}"), title_justify="left")
    for col in ("id", "time (UTC)", "status", "command", "machine", "cells", "runs"):
        table.add_column(col, justify="right" if col in ("id", "cells", "runs") else "left", overflow="fold")
    for r in store.list_runs():
        shown = shlex.join(["memsleuth", *r.argv[1:]]) if r.argv else r.name
        m = r.machine
        # Every cell is Text: a command line or host name is data, never markup.
        table.add_row(safe_text(str(r.id)), safe_text(r.created_at), safe_text(r.status), safe_text(shown),
                      safe_text(m.name + (f" ({m.cpu_model}, {m.kernel})" if m.cpu_model else "")), safe_text(str(r.cells)),
                      safe_text(str(r.samples)))
    console.print(table)
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
