"""`memsleuth doctor`: what this machine can measure, as a report (terminal, Markdown, JSON)."""
from __future__ import annotations

from dataclasses import asdict

from memsleuth.report.content import Report, Table

TITLE = "memsleuth doctor: what this machine can measure"


def build(checks) -> Report:
    """One row per check (measure.doctor.Check); a check that is not ok is marked in its value."""
    rows = [[c.name, c.value, c.meaning] for c in checks]
    failed = {(i, 1) for i, c in enumerate(checks) if not c.ok}
    return Report(TITLE, [], [Table("Checks", ["check", "value", "what it means for the numbers"], rows,
                                    failed=failed)], command="memsleuth doctor")


def document(checks) -> dict:
    return {"schema": "memsleuth.doctor/1", "checks": [asdict(c) for c in checks]}
