"""The summary of `memsleuth compare --suite` (allocator x workload: throughput ratio to the
workload's fastest, peak RSS beside it), read from the suite's stored runs: analysis only. Running
the suite is `session.run_suite`: each workload an ordinary compare of its own, so `memsleuth show
RUN` gives its full report; a workload that was interrupted or produced nothing shows so.
"""
from __future__ import annotations

import dataclasses
import math

from memsleuth.analysis.summary import RunAnalysis
from memsleuth.records.stored import StoredRun


@dataclasses.dataclass
class SuiteEntry:
    """One allocator on one workload."""
    ratio: float | None          # throughput ratio to the workload's fastest (>= 1: slower), paired
    resolved: bool               # whether that ratio's CI lies beyond the noise threshold
    peak_rss_kb: float | None
    status: str                  # "ok", or the failure's label


@dataclasses.dataclass
class SuiteSummary:
    contenders: list[str]
    workloads: list[str]
    entries: dict[tuple[str, str], SuiteEntry]    # per (contender, workload)
    means: dict[str, float | None]                # per contender: geometric mean of its ratios

    def entry(self, contender: str, workload: str) -> SuiteEntry | None:
        """The contender's entry for the workload; None where it has none (not run there)."""
        return self.entries[contender, workload] if (contender, workload) in self.entries else None

    def mean(self, contender: str) -> float | None:
        return self.means[contender] if contender in self.means else None


def summarise(runs: list[StoredRun], analyses: list[RunAnalysis]) -> SuiteSummary:
    """Per allocator and workload, its entry; per allocator, the geometric mean over the workloads.
    `analyses`: each run's analysis.analyse_run."""
    contenders: list[str] = []
    names: list[str] = []
    entries: dict[tuple[str, str], SuiteEntry] = {}
    for run, a in zip(runs, analyses):
        names.append(run.name)
        for g in a.groups:
            for c in g.cells:
                who = c.cell.contender
                if who not in contenders:
                    contenders.append(who)
                if c.estimate is None:
                    entries[(who, run.name)] = SuiteEntry(None, False, None, c.label)
                    continue
                r = c.ratio
                entries[(who, run.name)] = SuiteEntry(
                    r.median if r else None, bool(c.best_resolved or (c.verdict and c.verdict.kind == "slower")),
                    c.peak_rss.median if c.peak_rss else None, "ok")
    means = {who: geometric_mean([e.ratio for name in names if (e := entries.get((who, name))) and e.ratio])
             for who in contenders}
    return SuiteSummary(contenders, names, entries, means)


def geometric_mean(values: list[float]) -> float | None:
    vals = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None
