"""`memsleuth diff A B`: two stored runs cell by cell; exit 1 on a resolved regression."""
from __future__ import annotations

from rich.console import Console

from memsleuth import regression
from memsleuth.commands import options
from memsleuth.errors import EXIT_OK, EXIT_REGRESSION
from memsleuth.output import say_written, write_text
from memsleuth.store import Store
from memsleuth.units import parse_fraction

NAME = "diff"
HELP = "compare two stored runs cell by cell; exit 1 on a resolved regression"


def add_arguments(d) -> None:
    d.add_argument("run_a", metavar="RUN_A")
    d.add_argument("run_b", metavar="RUN_B")
    d.add_argument("--threshold", metavar="PCT", default="5%", action=options.Once,
                   help="call a change only when its whole CI lies beyond this (default 5%%)")
    options.add_store(d)
    d.add_argument("--md", metavar="FILE", action=options.Once,
                   help="also write the comparison as Markdown (for a pull request)")


def run(args, command, console: Console) -> int:
    from memsleuth.report import markdown, model, terminal
    options.writable_output(args.md, "--md")
    threshold = parse_fraction(args.threshold, "--threshold")
    store = Store(args.db, readonly=True)
    a, b = store.load_run(options.run_id(args.run_a)), store.load_run(options.run_id(args.run_b))
    changes = regression.compare_runs(a, b, threshold)
    report = model.build_diff(a, b, changes, threshold)
    terminal.render(report, console)
    if args.md:
        write_text(args.md, markdown.render(report), "the Markdown comparison")
        say_written("Markdown", args.md)
    return EXIT_REGRESSION if any(ch.regression for ch in changes) else EXIT_OK
