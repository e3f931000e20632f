"""Unstable measurement: the numbers of this cell move too much to be trusted as printed."""
from __future__ import annotations

from memsleuth.analysis.findings.base import Finding, confidence_from_margin
from memsleuth.analysis.view import CellView

# A CI half-width beyond 5% of the median: differences under ~10% between cells are not resolved.
CI_HALF_WIDTH = 0.05
# The CI of the median is what decides whether differences resolve; a high coefficient of
# variation or a few outliers with a tight CI (medians are robust to both) are listed under
# "Measurement quality" but are not instability. They are quoted here when the CI is wide.
SUPPORTING_CODES = ("cv", "first-outlier", "outliers", "load")


def check_run(views: list[CellView]) -> list[Finding]:
    """One finding for the whole run, naming every cell whose CI is wider than the threshold:
    noise speaks once, not once per cell."""
    wide = [(v, v.ci_half_width) for v in views if v.ci_half_width is not None and v.ci_half_width > CI_HALF_WIDTH]
    if not wide:
        return []
    wide.sort(key=lambda vw: -vw[1])
    cells = ", ".join(f"{v.label} ±{hw:.1%}" for v, hw in wide[:8]) + (f" and {len(wide) - 8} more" if len(wide) > 8
                                                                      else "")
    supporting = sorted({w.code for v, _ in wide for w in v.warnings if w.code in SUPPORTING_CODES})
    evidence = [f"{len(wide)} of {len(views)} cells have a 95% CI half-width beyond ±{CI_HALF_WIDTH:.0%} of the "
                f"median: {cells}"]
    if supporting:
        evidence.append("measurement-quality flags on those cells: " + ", ".join(supporting) +
                        " (the Measurement quality table has them per cell)")
    worst = wide[0][1]
    return [Finding(
        id="unstable-measurement", title=f"Unstable measurement in {len(wide)} of {len(views)} cells",
        mechanism="run-to-run variation leaves these cells' medians uncertain by more than "
                  f"±{CI_HALF_WIDTH:.0%}, so smaller differences from them are not resolved",
        evidence=evidence,
        advice="run on a quiet machine (memsleuth doctor), lengthen each run (more iterations), add rounds "
               "(--max-reps), and trust only paired verdicts that are resolved",
        subject="this run", confidence=confidence_from_margin(worst / CI_HALF_WIDTH),
        numbers={"cells": [v.label for v, _ in wide], "ci_half_width_max": worst})]
