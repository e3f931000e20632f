"""`memsleuth doctor`: what this machine can measure and what makes numbers noisy."""
from __future__ import annotations

from typing import TYPE_CHECKING

from memsleuth.commands import options

if TYPE_CHECKING:
    from rich.console import Console

NAME = "doctor"


def add_arguments(p) -> None:
    options.add_report_files(p)


def run(args, command, console: Console) -> int:
    from memsleuth.measure import doctor
    from memsleuth.report import terminal
    from memsleuth.report.builders import doctor as doctor_report
    from memsleuth.session import write_report_files
    options.writable_output(args.md, "--md")
    options.writable_output(args.json, "--json")
    checks = doctor.checks()
    report = doctor_report.build(checks)
    terminal.render(report, console)
    write_report_files(report, args, doctor_report.document(checks))
    return 0
