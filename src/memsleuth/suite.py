"""`memsleuth compare --suite`: every allocator workload, one stored run each, then one summary
table (allocator x workload: throughput ratio to the workload's fastest, peak RSS beside it).

Each workload runs as an ordinary compare of its own (its `suite` parameters, the same allocators,
interleaved rounds, the reference cell), so `memsleuth show RUN` gives its full report. The
summary reads those runs; a workload that was interrupted or produced nothing shows so.
"""
from __future__ import annotations

import dataclasses
import math
import sys
import time

from memsleuth import plan as planning, workloads
from memsleuth.analysis import analyse_run
from memsleuth.model import RunSpec
from memsleuth.store import Store, StoredRun

from memsleuth.workloads import SUITE_REPS  # noqa: E402,F401 (declared beside the suite)


def run_suite(store: Store, allocs, *, rounds: planning.Rounds, noise: float, env: dict, timeout_s, mem_limit,
              variants: list, variant_report: list, reference: bool):
    """Runs every suite workload; returns (the finished runs, whether Ctrl-C stopped the suite)."""
    from memsleuth.session import measure
    runs: list[StoredRun] = []
    t0 = time.monotonic()
    for k, w in enumerate(workloads.SUITE):
        options = [f"{name}={value}" for name, value in (w.suite or {}).items()]
        p = planning.workload_plan(w, allocs, options, rounds=rounds, timeout_s=timeout_s,
                                   mem_limit_bytes=mem_limit, env=env)
        # One group per workload: nothing is swept (a default sweep, like random-mixed's ws, is fixed
        # by the suite's parameters).
        p = dataclasses.replace(p, swept=())
        if variants:
            cells, _ = planning.with_variants(list(p.cells), variants)
            p = dataclasses.replace(p, cells=tuple(cells))
        if reference:
            p = dataclasses.replace(p, reference=planning.reference_cell())
        spec = RunSpec(rounds=p.rounds.describe(), min_reps=p.rounds.min_reps, max_reps=p.rounds.max_reps,
                       target_ci=p.rounds.target_ci, noise=noise, env=env, warmup=p.warmup, swept=list(p.swept),
                       timeout_s=p.timeout_s, mem_limit_bytes=p.mem_limit_bytes, variants=variant_report)
        print(f"memsleuth: suite {k + 1}/{len(workloads.SUITE)}: {w.name} "
              f"({', '.join(options) or 'defaults'}), {time.monotonic() - t0:.0f} s elapsed", file=sys.stderr,
              flush=True)
        outcome = measure(store, p, kind="workload", name=w.name, spec=spec, allocs=allocs,
                          announce=f"{len(p.cells)} cells, {p.rounds.describe()}")
        runs.append(store.load_run(outcome.run_id))
        if outcome.interrupted:
            return runs, True
    return runs, False


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
