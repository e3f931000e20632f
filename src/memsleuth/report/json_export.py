"""The run as JSON (docs/json-schema.md): every cell, its summary and every sample's evidence,
with the findings of the same analysis the report shows (the report's builder hands it over)."""
from __future__ import annotations

import json

from memsleuth.analysis.summary import CheckAnalysis, RunAnalysis
from memsleuth.records.stored import StoredRun
from memsleuth.report.wording import compare_answer

SCHEMA = "memsleuth.run/1"


def document(run: StoredRun, a=None) -> dict:
    """The JSON document of a run from its analysis, made once by whoever built the report
    (builders.for_run): a RunAnalysis, a CheckAnalysis or a cases.CaseAnalysis."""
    from memsleuth.cases import CaseAnalysis
    case = None
    if isinstance(a, CaseAnalysis):
        case = {"name": run.name, **a.result.to_dict()}
        a = a.run
    if isinstance(a, CheckAnalysis):
        summaries = {a.cell.id: a.summary}
        own = {id(f) for f in a.summary.findings}
        run_level, quiet, answer = [f for f in a.findings if id(f) not in own], a.quiet, []
    else:
        if not isinstance(a, RunAnalysis):
            raise TypeError(f"run {run.id}: no analysis to export (got {type(a).__name__})")
        summaries = {c.cell.id: c for g in a.groups for c in g.cells}
        run_level, quiet, answer = a.findings, a.quiet, compare_answer(a.standings)
    cells = []
    for cell in run.cells:
        s = summaries.get(cell.id)
        cells.append({
            "id": cell.id,
            "label": cell.label,
            "allocator": cell.allocator.to_dict(),
            "params": cell.params,
            "env": cell.env,
            "command": cell.command,
            "summary": s.to_dict() if s is not None else None,
            "where": cell.where.to_dict() if cell.where else None,    # the call sites (sites.py), or None
            "samples": [dict(round=r, warmup=w, **smp.to_dict()) for r, w, smp in cell.samples],
        })
    return {
        "schema": SCHEMA,
        "run": {"id": run.id, "created_at": run.created_at, "finished_at": run.finished_at, "status": run.status,
                "kind": run.kind, "name": run.name, "argv": run.argv, "spec": run.spec.to_dict(),
                "machine": run.machine.to_dict(),
                "memsleuth_version": run.version},
        "cells": cells,
        "findings": [f.to_dict() for f in run_level],    # a cell's own are in its summary
        "no_material_cost": quiet,
        "answer": answer,
        **({"cpu_time_by_path": [p.to_dict() for p in a.cpu_time],
            "cpu_profile": a.view.profile.to_dict()} if isinstance(a, CheckAnalysis) and a.cpu_time else {}),
        **({"cpu_time_by_who": [p.to_dict() for p in a.who_ran]} if isinstance(a, CheckAnalysis) and a.who_ran
           else {}),
        **({"case": case} if case is not None else {}),
    }


def render(report) -> str:
    """The stored run behind a report (report.run), as JSON, from the analysis its builder kept."""
    doc = document(report.run, report.analysis)
    if report.answer:   # the report's first lines, as every format opens with them (check, diff: its builder's)
        doc["answer"] = list(report.answer)
    if report.timings or report.run.facts.timings:
        # where the command's time went: the measuring phases (stored with the run) and this report's own
        doc["timings"] = {**report.run.facts.timings, **report.timings}
    return json.dumps(doc, indent=2) + "\n"
