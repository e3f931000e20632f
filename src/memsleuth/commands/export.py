"""`memsleuth export RUN --format json|csv|pyperf`."""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from memsleuth.commands import options
from memsleuth.errors import UsageError
from memsleuth.report.output import say_written, write_text

if TYPE_CHECKING:
    from rich.console import Console

NAME = "export"


def add_arguments(e) -> None:
    e.add_argument("run", metavar="RUN")
    e.add_argument("--format", choices=("json", "csv", "pyperf"), default="json", action=options.Once,
                   help="json: the whole run with every sample and the analysis (docs/json-schema.md); csv: one row "
                        "per sample; pyperf: a pyperf benchmark suite file (default: json)")
    e.add_argument("--output", "-o", metavar="FILE", action=options.Once,
                   help="write here (default: stdout; pyperf needs a file)")
    options.add_store(e)


def run(args, command, console: Console) -> int:
    from memsleuth.records.store import Store
    from memsleuth.report import builders, csv_export, json_export, pyperf_export
    store = Store(args.db, readonly=True)
    run_ = store.load_run(options.run_id(args.run))
    if args.format == "pyperf":
        if not args.output:
            raise UsageError("--format pyperf writes a file: give --output FILE")
        options.writable_output(args.output, "--output")
        pyperf_export.write(run_, args.output)
        say_written("pyperf JSON", args.output)
        return 0
    text = json_export.render(builders.for_run(run_)) if args.format == "json" else csv_export.text(run_)
    if args.output:
        options.writable_output(args.output, "--output")
        write_text(args.output, text, f"the {args.format} export")
    else:
        sys.stdout.write(text)
    return 0
