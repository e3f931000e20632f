"""The report as Markdown (GitHub-flavoured tables), for files and pull requests.

Every piece of text is escaped: HTML (a `<script>` in argv must stay text in a wiki or a pull
request that renders HTML), Markdown's own punctuation (so that `*`, `_`, backticks or `[` in a
name do not turn into formatting or links) and, in tables, `|` and newlines.
"""
from __future__ import annotations

import html
import re

from memsleuth.report.content import Report
from memsleuth.report.wording import who_text

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~])")


def escape(text: str) -> str:
    """Text that renders as itself in Markdown and in the HTML a renderer makes of it."""
    t = html.escape(str(text), quote=False)   # quotes need no escaping outside attributes
    t = _MD_SPECIAL.sub(r"\\\1", t)
    return t.replace("\r", " ").replace("\n", "<br>")


def _line(text: str) -> str:
    """A list item or a paragraph: a leading '-', digits and a dot, or '>' must not start a block."""
    t = escape(text)
    return re.sub(r"^(\s*)([-=>]|\d+\.)", lambda m: m.group(1) + "\\" + m.group(2), t)


def render(report: Report) -> str:
    out = [f"# {escape(report.title)}", ""]
    if report.answer:
        out += [f"**{escape(line)}**  " for line in report.answer] + [""]
    if report.question:
        out += [f"**Question:** {escape(report.question)}", ""]
    if report.statements:
        out += ["## What the evidence shows", ""]
        out += [f"- {escape(line)}" for line in report.statements] + [""]
    out += [f"- {escape(line)}" for line in report.header]
    for t in report.tables:
        out += ["", f"## {escape(t.title)}", ""]
        out.append("| " + " | ".join(escape(c) for c in t.columns) + " |")
        out.append("|" + "|".join("---:" if i in t.align_right else "---" for i in range(len(t.columns))) + "|")
        for r, row in enumerate(t.rows):
            out.append("| " + " | ".join(("**" + escape(c) + "**") if (r, i) in t.failed else
                                         ("_" + escape(c) + "_") if (r, i) in t.differs else escape(c)
                                         for i, c in enumerate(row)) + " |")
        if t.notes:
            out.append("")
            out += [f"_{escape(n)}_  " for n in t.notes]
    if report.findings or report.quiet:
        out += ["", "## Findings"]
    if report.quiet:
        out += ["", escape(report.quiet)]
    if report.findings:
        for f in report.findings:
            subject = f"{escape(f.subject)}: " if f.subject and f.subject != report.own_subject else ""
            out += ["", f"### {subject}{escape(f.title)} ({escape(f.confidence)} confidence)", "",
                    f"**Mechanism:** {escape(f.mechanism)}", "", "**Evidence:**", ""]
            out += [f"- {escape(e)}" for e in f.evidence]
            if getattr(f, "call_sites", None):
                out += ["", "**Call sites:**", ""] + [f"- {escape(line)}" for line in f.call_sites]
            who = who_text(f)
            if who:
                out += ["", f"**Who makes the calls:** {escape(who)}"]
            out += ["", f"**What to change:** {escape(f.advice)}"]
    if report.footer:
        out.append("")
        out += [f"**{escape(line)}**" for line in report.footer]
    return "\n".join(out) + "\n"
