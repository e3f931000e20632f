"""`memsleuth fleet status` (and collect's table): one line per task, as a report."""
from __future__ import annotations

from dataclasses import asdict

from memsleuth.report.content import Report, Table

COLUMNS = ("task", "target", "state", "partition", "node", "exit code", "from")


def build(job: str, results: str, states) -> Report:
    """states: measure.fleet.TaskState, one per task."""
    rows = [[str(x) for x in (s.index, s.target, s.state, s.partition, s.node, s.exit_code, s.source)] for s in states]
    return Report(f"fleet job {job} ({results})", [], [Table("Tasks", list(COLUMNS), rows)],
                  command=f"memsleuth fleet status {job}")


def document(job: str, results: str, states) -> dict:
    return {"schema": "memsleuth.fleet-status/1", "job": job, "results": results,
            "tasks": [asdict(s) for s in states]}
