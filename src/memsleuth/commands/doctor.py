"""`memsleuth doctor`: what this machine can measure and what makes numbers noisy."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from memsleuth.textsafe import safe_text

NAME = "doctor"


def add_arguments(p) -> None:
    pass


def run(args, command, console: Console) -> int:
    from memsleuth.measure import doctor
    table = Table(title="memsleuth doctor: what this machine can measure", title_justify="left")
    table.add_column("check")
    table.add_column("value")
    table.add_column("what it means for the numbers", overflow="fold")
    for c in doctor.checks():
        table.add_row(safe_text(c.name), safe_text(c.value, style="" if c.ok else "yellow"), safe_text(c.meaning))
    console.print(table)
    return 0
