"""`memsleuth show [RUN ...]`: reprint a stored run (the latest by default); several runs of the
same spec from different machines are shown side by side, by machine."""
from __future__ import annotations

from typing import TYPE_CHECKING

from memsleuth.commands import options

if TYPE_CHECKING:
    from rich.console import Console

NAME = "show"


def add_arguments(s) -> None:
    s.add_argument("run", nargs="*", help="run id; several: the same cells side by side by machine")
    options.add_store(s)
    options.add_outputs(s, pprof=True)


def run(args, command, console: Console) -> int:
    from memsleuth.session import emit
    from memsleuth.records.store import Store
    options.writable_output(args.md, "--md")
    options.writable_output(args.json, "--json")
    options.writable_output(args.pprof, "--pprof")
    options.writable_output(args.speedscope, "--speedscope")
    options.writable_output(args.html, "--html")
    store = Store(args.db, readonly=True)
    if len(args.run) <= 1:
        emit(store.load_run(options.run_id(args.run[0]) if args.run else None), args, console)
        return 0
    import sys
    from memsleuth.analysis import regression
    from memsleuth.analysis.summary import analyse_run
    from memsleuth.report import json_export, terminal
    from memsleuth.report.builders import machines
    from memsleuth.session import redacted, write_report_files
    runs = [store.load_run(options.run_id(r)) for r in args.run]
    analyses = [analyse_run(r) for r in runs]
    keys, matrix = regression.compare_machines(runs, analyses)
    report = machines.build(runs, keys, matrix, regression.same_cells(runs, analyses), redacted(sys.argv))
    terminal.render(report, console)
    write_report_files(report, args, {"schema": "memsleuth.machines/1",
                                      "runs": [json_export.document(r, a) for r, a in zip(runs, analyses)],
                                      "by_machine": {"columns": report.tables[0].columns,
                                                     "rows": report.tables[0].rows}})
    return 0
