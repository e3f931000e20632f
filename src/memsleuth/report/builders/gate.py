"""The gate's report (`memsleuth gate`): the verdict first, then one row per check. Built from a
gate.Result (which computed every number); this module only words and lays them out."""
from __future__ import annotations

import shlex

from memsleuth.analysis import gate as gating
from memsleuth.units import fmt_value
from memsleuth.report.content import Report, Table
from memsleuth.report.wording import change_text, command_text, memsleuth_command

VERDICT_WORDS = {gating.REGRESSION: "REGRESSION", gating.UNRESOLVED: "unresolved", gating.PASS: "pass",
                 gating.IMPROVEMENT: "improvement"}


def _setup(cell) -> str:
    """`glibc: KEY=VALUE ... /path/prog args` (the environment it ran with, then its command)."""
    env = " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(cell.env.items()))
    return f"{cell.allocator.name}: " + (env + " " if env else "") + command_text(cell.command)


def answer(result: gating.Result) -> list[str]:
    time = next(c for c in result.checks if c.kind == "time")
    regressions = [c for c in result.checks if c.gates and c.verdict == gating.REGRESSION]
    unresolved = [c for c in result.checks if c.gates and c.verdict == gating.UNRESOLVED]
    if regressions:
        head = "REGRESSION: " + "; ".join(f"{c.metric} {change_text(c)}" for c in regressions)
    elif unresolved:
        head = "Unresolved: " + "; ".join(f"{c.metric}: {c.text}" for c in unresolved)
    else:
        head = f"Pass: no regression resolved in time or in the counts ({result.rounds} paired rounds)"
    return [head, f"time ({result.estimator}), candidate / baseline, paired by round: {time.text}"]


def build(run, result: gating.Result, argv: list[str], cells=None) -> Report:
    """The gate session's checks; `cells` (analysis.RunAnalysis) is the run's cells as compare analyses
    them, kept for the run's JSON."""
    base, cand = run.cells
    header = [f"run {run.id} ({run.created_at}, {run.machine.name}); status {run.status}",
              f"baseline:  {_setup(base)}",
              f"candidate: {_setup(cand)}",
              f"{result.rounds} paired rounds, alternating (order swapped every round) after one warm-up each; "
              f"time: {result.estimator} time, called beyond ±{result.threshold:.0%} when its whole 95% CI is; "
              f"counts: beyond ±{result.count_threshold:.0%} and beyond the runs' own spread"]
    params = {k: v for k, v in base.params.items() if k != "variant"}
    if params:
        header.append(f"{run.name}: " + ", ".join(f"{k}={v}" for k, v in params.items()))
    rows, failed = [], set()
    for i, c in enumerate(result.checks):
        rows.append([c.metric, fmt_value(c.baseline, c.unit), fmt_value(c.candidate, c.unit), change_text(c),
                     VERDICT_WORDS[c.verdict] + ("" if c.gates else " (shown, not gated)"), c.text])
        if c.gates and c.verdict == gating.REGRESSION:
            failed.add((i, 4))
    table = Table("Checks, candidate against baseline", ["check", "baseline", "candidate", "change", "verdict", "why"],
                  rows, ["time: median of the per-round ratios candidate/baseline with its distribution-free 95% CI; "
                         "counts: medians of the runs, called only when every candidate run lies beyond every baseline "
                         "run (docs/ci.md)"], align_right={1, 2, 3}, failed=failed)
    footer = [{gating.REGRESSION: "Gate: FAIL (exit 1): a regression was resolved.",
               gating.UNRESOLVED: "Gate: UNRESOLVED (exit 5): no regression resolved, but not every gated check "
                                  "could be resolved either.",
               gating.PASS: "Gate: pass (exit 0)."}[result.verdict]]
    return Report(f"memsleuth gate — {result.cell}", header, [table], footer, answer=answer(result),
                  command=memsleuth_command(argv), run=run, analysis=cells,
                  footer_alert=result.verdict == gating.REGRESSION)


def to_dict(run, result: gating.Result) -> dict:
    def est(e):
        return None if e is None else {"median": e.median, "low": e.low, "high": e.high, "n": e.n}
    return {"schema": "memsleuth.gate/1", "run": run.id, "uuid": run.uuid, "verdict": result.verdict,
            "rounds": result.rounds, "time_estimator": result.estimator, "threshold": result.threshold,
            "count_threshold": result.count_threshold,
            "baseline": {"label": run.cells[0].label, "command": run.cells[0].command, "env": run.cells[0].env},
            "candidate": {"label": run.cells[1].label, "command": run.cells[1].command, "env": run.cells[1].env},
            "checks": [{"metric": c.metric, "kind": c.kind, "verdict": c.verdict, "gates": c.gates, "unit": c.unit,
                        "baseline": c.baseline, "candidate": c.candidate, "change": est(c.change),
                        "baseline_range": c.baseline_range, "candidate_range": c.candidate_range,
                        "threshold": c.threshold, "n": list(c.n), "text": c.text} for c in result.checks]}

