"""The report in the terminal, as rich tables.

Everything shown is built as rich Text, never parsed as markup: argv, allocator names, stderr and
parameter values are user text, and '[/]' or '[blink]' in them must print as they are.
"""
from __future__ import annotations

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from memsleuth.report.content import Report
from memsleuth.textsafe import visible


def _t(text, style: str = "") -> Text:
    return Text(visible(text), style=style)


def _assemble(*parts) -> Text:
    return Text.assemble(*[(visible(p[0]), p[1]) if isinstance(p, tuple) else visible(p) for p in parts])


def render(report: Report, console: Console | None = None) -> str:
    """Prints the report on `console` (or records it) and returns its text."""
    if console is None:
        recorder = Console(record=True, width=200, file=__import__("io").StringIO())
        _draw(report, recorder)
        return recorder.export_text()
    _draw(report, console)
    return ""


def _style(t, r: int, c: int) -> str:
    # A failure is painted because the model says the cell is one, never because of how its text
    # looks (an allocator may well be called HAKMEM).
    return "bold red" if (r, c) in t.failed else "bold yellow" if (r, c) in t.differs else ""


def _longest_word(t, c: int) -> int:
    words = [w for cell in [t.columns[c], *(row[c] for row in t.rows if c < len(row))] for w in visible(cell).split()]
    return max((len(w) for w in words), default=1)


def _grid(t) -> RichTable:
    rt = RichTable(title=_t(t.title, style="bold"), title_justify="left", show_lines=False)
    for i, col in enumerate(t.columns):
        # Never narrower than its longest word: a cell wraps between words, never inside a number.
        rt.add_column(_t(col), justify="right" if i in t.align_right else "left", overflow="fold",
                      min_width=_longest_word(t, i))
    for r, row in enumerate(t.rows):
        rt.add_row(*[_t(cell, style=_style(t, r, c)) for c, cell in enumerate(row)])
    return rt


def _fits(t, width: int) -> bool:
    """Whether the table fits `width` columns with no word of any cell split: each column at least
    as wide as its longest word (header included), plus rich's padding (2) and borders."""
    return 1 + sum(_longest_word(t, c) + 3 for c in range(len(t.columns))) <= width


def _stacked(t, console: Console) -> None:
    """A table too wide for the terminal, one block per row: the row's names (its left-aligned
    columns) as a heading, then one 'column: value' line each, so that no number is ever split."""
    console.print(_t(f"{t.title} (one block per row: the table is wider than this terminal)", style="bold"))
    names = [c for c in range(len(t.columns)) if c not in t.align_right][:2]
    for r, row in enumerate(t.rows):
        console.print(_assemble(("● ", "bold cyan"), (" · ".join(row[c] for c in names if c < len(row)), "bold")))
        for c, cell in enumerate(row):
            if c in names:
                continue
            console.print(_assemble(("  " + t.columns[c] + ": ", "dim"), (cell, _style(t, r, c))))


def _draw(report: Report, console: Console) -> None:
    # The answer first: the verdict or the costliest findings, a case's question and what its
    # evidence shows; then the setup, the tables and each finding with its evidence.
    console.print(_t(report.title, style="bold"))
    for line in report.answer:
        console.print(_t(line, style="bold"))
    if report.question:
        console.print(_assemble(("Question: ", "bold"), report.question))
    if report.statements:
        console.print(_t("What the evidence shows", style="bold"))
        for line in report.statements:
            console.print(_assemble(("● ", "bold cyan"), line))
    if report.answer or report.question or report.statements:
        console.print()
    for line in report.header:
        console.print(_t(line, style="dim"))
    for t in report.tables:
        console.print()
        if _fits(t, console.width):
            console.print(_grid(t))
        else:
            _stacked(t, console)
        for n in t.notes:
            console.print(_t(n, style="dim"))
    if report.findings or report.quiet:
        console.print()
        console.print(_t("Findings", style="bold"))
    if report.quiet:
        console.print(_assemble(("● ", "bold cyan"), report.quiet))
    if report.findings:
        for f in report.findings:
            head = [(f.subject, "bold"), " — "] if f.subject and f.subject != report.own_subject else []
            console.print(_assemble(("● ", "bold cyan"), *head, (f.title, "bold"),
                                    (f"  ({f.confidence} confidence)", "dim")))
            console.print(_t(f"  mechanism: {f.mechanism}"))
            for e in f.evidence:
                console.print(_t(f"    - {e}"))
            for line in getattr(f, "call_sites", []):
                console.print(_t(f"  where: {line}", style="cyan"))
            who = _who(f)
            if who:
                console.print(_t(f"  who makes the calls: {who}"))
            console.print(_t(f"  change: {f.advice}", style="green"))
    for line in report.footer:
        console.print(_t(line, style="bold red" if report.footer_alert else "yellow"))


def _who(f) -> str | None:
    from memsleuth.report.wording import who_text
    return who_text(f)
