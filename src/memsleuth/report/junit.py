"""Gate checks as JUnit XML: one test case per check, a regression as a failure, an unresolved
gated check as skipped with its reason (CI test reports show it, and it does not read as a pass).
Every name and message is data: xml.etree escapes it."""
from __future__ import annotations

import xml.etree.ElementTree as ET

from memsleuth.analysis import gate as gating
from memsleuth.textsafe import visible


def render(checks: list[gating.Check], suite: str) -> str:
    root = ET.Element("testsuites")
    ts = ET.SubElement(root, "testsuite", name=visible(suite), tests=str(len(checks)),
                       failures=str(sum(c.gates and c.verdict == gating.REGRESSION for c in checks)),
                       skipped=str(sum(c.gates and c.verdict == gating.UNRESOLVED for c in checks)), errors="0")
    for c in checks:
        tc = ET.SubElement(ts, "testcase", classname=visible(c.cell), name=visible(c.metric))
        if not c.gates:
            ET.SubElement(tc, "system-out").text = visible(f"shown, not gated: {c.text}")
        elif c.verdict == gating.REGRESSION:
            ET.SubElement(tc, "failure", message=visible(c.text), type="regression").text = visible(c.text)
        elif c.verdict == gating.UNRESOLVED:
            ET.SubElement(tc, "skipped", message=visible(c.text))
        else:
            ET.SubElement(tc, "system-out").text = visible(f"{c.verdict}: {c.text}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
