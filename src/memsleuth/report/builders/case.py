"""`memsleuth case NAME`: the question, the case's tables and figures, what the evidence shows,
and the failures."""
from __future__ import annotations

from memsleuth.cases import CaseAnalysis
from memsleuth.errors import UsageError
from memsleuth.records.model import cell_label
from memsleuth.records.stored import StoredRun
from memsleuth.report.content import Report, ResultFigure, Table
from memsleuth.report.sections import FLAT_RSS_MIB, FLAT_RSS_SHARE, failures_table, flat_timeline, timeline_figure
from memsleuth.report.wording import case_cell_text, leftover_lines, machine_lines, memsleuth_command
from memsleuth.units import fmt_size_arg


def build(run: StoredRun, a: CaseAnalysis) -> Report:
    """`memsleuth case NAME`: the question, the case's tables, what the evidence shows, and failures,
    from the run's analysis (cases.analyse)."""
    case, result = a.case, a.result
    params = run.spec.case_params
    header = [f"case {case.name} (seed {case.seed}); {run.spec.rounds} + {run.spec.warmup} "
              f"warm-up per cell; status {run.status}; {run.created_at}", *machine_lines(run)]
    if params:
        header.append("parameters: " + ", ".join(f"{k}={_param_text(case, k, v)}" for k, v in params.items()))
    tables = [Table(t.title, t.columns, [[case_cell_text(c) for c in r] for r in t.rows], t.notes,
                    align_right={i for i, c in enumerate(t.columns) if i and t.rows and
                                 all(not isinstance(r[i], str) for r in t.rows)})
              for t in result.tables]
    header += leftover_lines(run.cells)
    swept = list(run.spec.swept)
    failed = failures_table(a.run.groups, swept)
    if failed:
        tables.append(failed)
    footer = ["This run was interrupted: the tables show the samples that finished."] if run.status == "interrupted" else []
    figures = [ResultFigure(f.title, f.unit, f.rows, f.higher_is_better) for f in result.figures]
    def caption(c) -> str:   # sizes as typed (sizes=4M), not as bytes
        return cell_label(c.allocator.name, {k: _param_text(case, k, v) for k, v in c.params.items()})
    lines = [f for c in run.cells if (f := timeline_figure(caption(c), [s for _, s in c.measured() if s.ok]))]
    moving = [f for f in lines if not flat_timeline(f)]
    if len(moving) < len(lines):
        footer.append(f"Memory over time: {len(lines) - len(moving)} of {len(lines)} cells' panels are left out of the "
                      f"HTML report: their resident memory stayed within {FLAT_RSS_SHARE:.0%} (and "
                      f"{FLAT_RSS_MIB:g} MiB) of its peak for the whole run.")
    figures += moving
    return Report(f"memsleuth case {case.name} — run {run.id}", header, tables, footer,
                  question=result.question, statements=result.statements, figures=figures,
                  command=memsleuth_command(run.argv), run=run, analysis=a)


def _param_text(case, key: str, value) -> str:
    """A case parameter as it would be typed: sizes with their suffix (1G, not 1073741824)."""
    text = ",".join(str(x) for x in value) if isinstance(value, list) else str(value)
    try:
        kind = case.param(key).kind
    except UsageError:            # a label the case adds (variant, tunables), not a parameter
        return text
    return fmt_size_arg(text) if kind in ("size", "sizes") else text
