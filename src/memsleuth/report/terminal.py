"""The report in the terminal, as rich tables."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from memsleuth.report.model import Report


def render(report: Report, console: Console) -> None:
    console.print(Text(report.title, style="bold"))
    for line in report.header:
        console.print(Text(line, style="dim"))
    if report.question:
        console.print()
        console.print(Text.assemble(("Question: ", "bold"), report.question))
    for t in report.tables:
        rt = RichTable(title=t.title, title_justify="left", title_style="bold", show_lines=False)
        for i, col in enumerate(t.columns):
            rt.add_column(col, justify="right" if i in t.align_right else "left", overflow="fold")
        for row in t.rows:
            styled = [Text(cell, style="bold red") if cell.isupper() and cell.replace("-", "").isalpha() and len(cell) > 2
                      else cell for cell in row]
            rt.add_row(*styled)
        console.print()
        console.print(rt)
        for n in t.notes:
            console.print(Text(n, style="dim"))
    if report.statements:
        console.print()
        console.print(Text("What the evidence shows", style="bold"))
        for line in report.statements:
            console.print(Text.assemble(("● ", "bold cyan"), line))
    if report.findings:
        console.print()
        console.print(Text("Findings", style="bold"))
        for f in report.findings:
            console.print(Text.assemble(("● ", "bold cyan"), (f.subject, "bold"), " — ", (f.title, "bold"),
                                        (f"  ({f.confidence} confidence)", "dim")))
            console.print(Text(f"  mechanism: {f.mechanism}"))
            for e in f.evidence:
                console.print(Text(f"    - {e}"))
            console.print(Text(f"  change: {f.advice}", style="green"))
    for line in report.footer:
        console.print(Text(line, style="yellow"))
