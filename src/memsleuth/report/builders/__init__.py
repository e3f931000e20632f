"""One builder per report kind. Each takes a stored run (or two, or several) and what analysis
computed from it, and words it as a `Report` (report/content.py); none computes a number.

`for_run` is where a stored run is analysed for its report: once, by its kind, and the result is
handed to the builder, which keeps it on the report for the JSON export. A gate session, a
`--try` session and a fleet task are words about their cells, not an analysis of them: their
JSON carries the cells as compare analyses them, made here too and handed over the same way.

| report | analysis | builder |
|---|---|---|
| compare, `show RUN` | `analysis.analyse_run` | `compare.build` |
| check | `analysis.analyse_check` | `check.build` |
| case | `cases.analyse` | `case.build` |
| gate session | `gate.evaluate` | `gate.build` |
| `check --try` | `tried.evaluate` | `tried.build` |
| fleet task Slurm did not complete | (the recorded facts) | `fleet_task.build` |
| diff | `regression.compare_runs`, `reference_change` | `diff.build` (from `commands/diff.py`) |
| `compare --suite` | `suite.summarise` | `suite.build` (from `commands/compare.py`) |
| `show RUN RUN ...` | `regression.compare_machines` | `machines.build` (from `commands/show.py`) |
| `history --trend` | `trend.series` | `trend.build` (from `commands/history.py`) |
"""
from __future__ import annotations

from memsleuth.records.stored import StoredRun
from memsleuth.report.content import Report


def for_run(run: StoredRun) -> Report:
    """The report of a stored run, by its kind, from its analysis made once here."""
    from memsleuth.analysis import summary as analysis, gate as gating
    from memsleuth.report.builders import case, check, compare, fleet_task, gate, tried
    compared = None     # the cells as compare analyses them: a gate or --try session's JSON, or its fallback
    is_try, is_gate = run.kind == "try" and len(run.cells) >= 2, bool(run.spec.gate) and len(run.cells) == 2
    if is_try or is_gate:
        compared = analysis.analyse_run(run)
        try:
            time, threshold, count_threshold = gating.settings(run)
            if is_try:
                from memsleuth.analysis import tried as trying
                return tried.build(run, trying.evaluate(run, time, threshold, count_threshold),
                                   run.facts.check_run, compared)
            return gate.build(run, gating.evaluate(run, time, threshold, count_threshold), list(run.argv), compared)
        except (KeyError, TypeError, ValueError):
            pass     # a damaged gate/try record: shown as the plain run it also is
    if run.kind == "check":
        return check.build(run, analysis.analyse_check(run))
    if run.kind == "case":
        from memsleuth import cases
        return case.build(run, cases.analyse(run))
    if run.kind == "fleet-task":
        return fleet_task.build(run, analysis.analyse_run(run))
    return compare.build(run, compared or analysis.analyse_run(run))
