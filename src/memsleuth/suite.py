"""The summary of `memsleuth compare --suite` (allocator x workload: throughput ratio to the
workload's fastest, peak RSS beside it), read from the suite's stored runs: analysis only. Running
the suite is `session.run_suite`: each workload an ordinary compare of its own, so `memsleuth show
RUN` gives its full report; a workload that was interrupted or produced nothing shows so.
"""
from __future__ import annotations

import dataclasses
import math

from memsleuth.analysis import analyse_run
from memsleuth.records import StoredRun


@dataclasses.dataclass
class SuiteEntry:
    """One allocator on one workload."""
    ratio: float | None          # throughput ratio to the workload's fastest (>= 1: slower), paired
    resolved: bool               # whether that ratio's CI lies beyond the noise threshold
    peak_rss_kb: float | None
    status: str                  # "ok", or the failure's label


def summarise(runs: list[StoredRun]) -> tuple[list[str], list[str], dict[tuple[str, str], SuiteEntry]]:
    """(contenders, workloads, entry per (contender, workload))."""
    contenders: list[str] = []
    names: list[str] = []
    entries: dict[tuple[str, str], SuiteEntry] = {}
    for run in runs:
        names.append(run.name)
        for g in analyse_run(run).groups:
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
    return contenders, names, entries


def geometric_mean(values: list[float]) -> float | None:
    vals = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None
