"""`memsleuth diff A B`: two stored runs cell by cell; exit 1 on a resolved regression."""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from memsleuth.commands import options
from memsleuth.errors import EXIT_OK, EXIT_REGRESSION
from memsleuth.units import parse_fraction

if TYPE_CHECKING:
    from rich.console import Console

NAME = "diff"


def add_arguments(d) -> None:
    d.add_argument("run_a", metavar="RUN_A")
    d.add_argument("run_b", metavar="RUN_B")
    d.add_argument("--threshold", metavar="PCT", default="5%", action=options.Once,
                   help="call a change only when its whole CI lies beyond this (default 5%%)")
    d.add_argument("--count-threshold", metavar="PCT", default="10%", action=options.Once,
                   help="counts (page faults, memory syscalls, RSS): called beyond this change and beyond the runs' "
                        "spread (default 10%%)")
    options.add_store(d)
    d.add_argument("--md", metavar="FILE", action=options.Once,
                   help="also write the comparison as Markdown (for a pull request)")
    d.add_argument("--html", metavar="FILE", action=options.Once,
                   help="also write the comparison as one self-contained HTML file with its plot")
    d.add_argument("--junit", metavar="FILE", action=options.Once,
                   help="also write every check (time and counts per cell) as JUnit XML for CI test reports")


def run(args, command, console: Console) -> int:
    from memsleuth.session import redacted, write_formats
    from memsleuth.records.store import Store
    from memsleuth.report import terminal
    from memsleuth.report.builders import diff as diff_report
    options.writable_output(args.md, "--md")
    options.writable_output(args.html, "--html")
    options.writable_output(args.junit, "--junit")
    threshold = parse_fraction(args.threshold, "--threshold")
    count_threshold = parse_fraction(args.count_threshold, "--count-threshold")
    store = Store(args.db, readonly=True)
    a, b = store.load_run(options.run_id(args.run_a)), store.load_run(options.run_id(args.run_b))
    from memsleuth.analysis import regression
    changes = regression.compare_runs(a, b, threshold, count_threshold)
    report = diff_report.build(a, b, changes, regression.reference_change(a, b), threshold, argv=redacted(sys.argv))
    terminal.render(report, console)
    write_formats(report, args)
    if args.junit:
        from memsleuth.report.output import say_written, write_text
        from memsleuth.report import junit
        checks = regression.junit_checks(changes, threshold)
        write_text(args.junit, junit.render(checks, suite=f"memsleuth diff {a.id} {b.id}"), "the JUnit XML")
        say_written("JUnit XML", args.junit)
    return EXIT_REGRESSION if any(ch.regression for ch in changes) else EXIT_OK
