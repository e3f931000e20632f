"""Unstable measurement: the numbers of this cell move too much to be trusted as printed."""
from __future__ import annotations

from memsleuth.findings.base import Finding, confidence
from memsleuth.findings.view import CellView

# A CI half-width beyond 5% of the median: differences under ~10% between cells are not resolved.
CI_HALF_WIDTH = 0.05
# The CI of the median is what decides whether differences resolve; a high coefficient of
# variation or a few outliers with a tight CI (medians are robust to both) are listed under
# "Measurement quality" but are not instability. They are quoted here when the CI is wide.
SUPPORTING_CODES = ("cv", "first-outlier", "outliers", "load")


def check(view: CellView) -> list[Finding]:
    evidence = []
    hw = view.ci_half_width
    if hw is not None and hw > CI_HALF_WIDTH:
        evidence.append(f"95% CI half-width ±{hw:.1%} of the median (threshold ±{CI_HALF_WIDTH:.0%})")
    if not evidence:
        return []
    evidence += [w.text for w in view.warnings if w.code in SUPPORTING_CODES]
    return [Finding(
        id="unstable-measurement", title="Unstable measurement",
        mechanism="run-to-run variation leaves this cell's median uncertain by more than "
                  f"±{CI_HALF_WIDTH:.0%}, so smaller differences from it are not resolved",
        evidence=evidence,
        advice="run on a quiet machine (memsleuth doctor), lengthen each run (more iterations), add rounds "
               "(--max-reps), and trust only paired verdicts that are resolved",
        subject=view.label, confidence=confidence((hw or CI_HALF_WIDTH) / CI_HALF_WIDTH + len(evidence) - 1),
        numbers={"ci_half_width": hw})]
