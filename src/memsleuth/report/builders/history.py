"""`memsleuth history`: the stored runs, one line each, as a report (terminal, Markdown, JSON)."""
from __future__ import annotations

import shlex

from memsleuth.records.stored import RunSummary
from memsleuth.report.content import Report, Table


def _command(r: RunSummary) -> str:
    return shlex.join(["memsleuth", *r.argv[1:]]) if r.argv else r.name


def build(runs: list[RunSummary], store_path: str) -> Report:
    rows = [[str(r.id), r.created_at, r.status, _command(r),
             r.machine.name + (f" ({r.machine.cpu_model}, {r.machine.kernel})" if r.machine.cpu_model else ""),
             str(r.cells), str(r.samples)] for r in runs]
    table = Table(f"runs in {store_path}", ["id", "time (UTC)", "status", "command", "machine", "cells", "runs"], rows,
                  align_right={0, 5, 6})
    return Report("memsleuth history", [] if rows else [f"no runs in {store_path}"], [table] if rows else [])


def document(runs: list[RunSummary], store_path: str) -> dict:
    return {"schema": "memsleuth.history/1", "store": store_path,
            "runs": [{"id": r.id, "created_at": r.created_at, "status": r.status, "kind": r.kind, "name": r.name,
                      "command": _command(r), "machine": r.machine.name, "cells": r.cells, "samples": r.samples}
                     for r in runs]}
