"""The run as JSON (docs/json-schema.md): every cell, its summary and every sample's evidence."""
from __future__ import annotations

import json

from memsleuth.analysis import analyse_run
from memsleuth.records import StoredRun

SCHEMA = "memsleuth.run/1"


def to_dict(run: StoredRun) -> dict:
    a = analyse_run(run)
    summaries = {c.cell.id: c for g in a.groups for c in g.cells}
    cells = []
    for cell in run.cells:
        s = summaries[cell.id]
        cells.append({
            "id": cell.id,
            "label": cell.label,
            "allocator": cell.allocator.to_dict(),
            "params": cell.params,
            "env": cell.env,
            "command": cell.command,
            "summary": s.to_dict(),
            "where": cell.where,             # the call sites (where.py), or None
            "samples": [dict(round=r, warmup=w, **smp.to_dict()) for r, w, smp in cell.samples],
        })
    return {
        "schema": SCHEMA,
        "run": {"id": run.id, "created_at": run.created_at, "finished_at": run.finished_at, "status": run.status,
                "kind": run.kind, "name": run.name, "argv": run.argv, "spec": run.spec.to_dict(),
                "machine": run.machine.to_dict(),
                "memsleuth_version": run.version},
        "cells": cells,
        "findings": [f.to_dict() for f in a.findings],
        "no_material_cost": a.quiet,
        "answer": a.answer,
        **({"case": _case(run)} if run.kind == "case" else {}),
    }


def _case(run: StoredRun) -> dict:
    """A case study's question, tables (formatted, with units) and statements."""
    from memsleuth import cases
    return {"name": run.name, **cases.get(run.name).analyse(run).to_dict()}


def render(report) -> str:
    """The stored run behind a report (report.run), as JSON."""
    return json.dumps(to_dict(report.run), indent=2) + "\n"
