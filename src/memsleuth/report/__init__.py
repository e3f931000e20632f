"""The report: `content.py` is the report as data, `builders/` fill it (one per report kind, from
what analysis computed), and each format is a module whose `render(report)` returns it as text:
terminal (rich), Markdown, HTML, and the exports of the run behind it (JSON, CSV, pyperf)."""
from __future__ import annotations


def formats() -> dict:
    from memsleuth.report import csv_export, html, json_export, markdown, pyperf_export, terminal
    return {"terminal": terminal.render, "markdown": markdown.render, "html": html.render,
            "json": json_export.render, "csv": csv_export.render, "pyperf": pyperf_export.render}
