"""The report as Markdown (GitHub-flavoured tables), for files and pull requests."""
from __future__ import annotations

from memsleuth.report.model import Report


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(report: Report) -> str:
    out = [f"# {report.title}", ""]
    out += [f"- {_cell(line)}" for line in report.header]
    if report.question:
        out += ["", f"**Question:** {_cell(report.question)}"]
    for t in report.tables:
        out += ["", f"## {t.title}", ""]
        out.append("| " + " | ".join(_cell(c) for c in t.columns) + " |")
        out.append("|" + "|".join("---:" if i in t.align_right else "---" for i in range(len(t.columns))) + "|")
        for row in t.rows:
            out.append("| " + " | ".join(_cell(c) for c in row) + " |")
        if t.notes:
            out.append("")
            out += [f"_{_cell(n)}_  " for n in t.notes]
    if report.statements:
        out += ["", "## What the evidence shows", ""]
        out += [f"- {_cell(line)}" for line in report.statements]
    if report.findings:
        out += ["", "## Findings"]
        for f in report.findings:
            out += ["", f"### {_cell(f.subject)}: {_cell(f.title)} ({f.confidence} confidence)", "",
                    f"**Mechanism:** {_cell(f.mechanism)}", "", "**Evidence:**", ""]
            out += [f"- {_cell(e)}" for e in f.evidence]
            out += ["", f"**What to change:** {_cell(f.advice)}"]
    if report.footer:
        out.append("")
        out += [f"**{_cell(line)}**" for line in report.footer]
    return "\n".join(out) + "\n"
