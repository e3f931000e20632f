"""From stored samples to what the report shows: per-cell summaries and per-group comparisons.

A cell's headline metric is the throughput of its region `main` (ops/s, higher is better) when
every ok sample has one, else the whole process's wall time (seconds, lower is better). The
evidence columns are medians over the cell's ok samples, from region `main` where the probe
reported it (the region of interest), else from the whole process.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from memsleuth.analysis import cpu_time as cpu_time_mod, findings, latency as latency_mod, quality, runtimes, user_time
from memsleuth import stats
from memsleuth.events import HARDWARE as HARDWARE_EVENTS, SYSCALL_COLUMNS, SYSCALLS
from memsleuth.records.evidence import Sample, higher_is_better, metric_kind
from memsleuth.analysis import tries
from memsleuth.analysis.cost import UnitCosts
from memsleuth.analysis.findings.base import confidence_from_margin
from memsleuth.records.model import Readings, cell_label
from memsleuth.records.sites import CallSites
from memsleuth.records.stored import StoredCell, StoredRun

if TYPE_CHECKING:
    from memsleuth.analysis.memory import Footprint

FAILED_LABEL = {"crashed": "SEGFAULT", "oom": "OOM", "timeout": "TIMEOUT", "preload-failed": "PRELOAD-FAILED",
                "error": "ERROR"}


def failure_label(sample: Sample) -> str:
    if sample.status == "crashed":
        if sample.signal_name == "SEGV":
            return "SEGFAULT"
        return f"SIG{sample.signal_name}" if sample.signal_name else "CRASHED"
    return FAILED_LABEL.get(sample.status, sample.status.upper())


@dataclass
class MedianEvidence:
    """Medians over a cell's ok samples; None where nothing was measured."""
    scope: str                                 # "region main" or "process"
    user_s: float | None = None
    sys_s: float | None = None
    sys_share: float | None = None             # sys / (user + sys)
    minflt: float | None = None
    majflt: float | None = None
    maxrss_kb: float | None = None
    syscalls: Readings = field(default_factory=Readings)   # the counted calls; None: not counted
    hardware: Readings = field(default_factory=Readings)
    context_switches: float | None = None
    unsupported: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.syscalls, self.hardware = Readings(self.syscalls), Readings(self.hardware)

    def to_dict(self) -> dict:
        return {"scope": self.scope, "user_s": self.user_s, "sys_s": self.sys_s, "sys_share": self.sys_share,
                "minflt": self.minflt, "majflt": self.majflt, "maxrss_kb": self.maxrss_kb,
                "syscalls": self.syscalls, "hardware": self.hardware, "context_switches": self.context_switches}


@dataclass
class CellSummary:
    cell: StoredCell
    metric: str                                # "ops_per_s", "output" (--metric) or "wall_s"
    estimate: stats.Estimate | None            # None when no sample succeeded
    failures: list[Sample]
    ok_samples: list[tuple[int, Sample]]
    evidence: MedianEvidence
    checksum_mismatch: bool = False
    ratio: stats.Estimate | None = None        # vs the best cell of its group (>= 1: how much slower)
    verdict: stats.Verdict | None = None       # that ratio read against the noise threshold
    is_best: bool = False
    best_resolved: bool = False                 # the best, and at least one other cell resolved slower than it
    warnings: list[quality.QualityWarning] = field(default_factory=list)
    findings: list[findings.Finding] = field(default_factory=list)             # from this cell's evidence
    pair_findings: list[findings.Finding] = field(default_factory=list)        # from it against the fastest

    short_label: str = ""                       # allocator and the swept parameters only
    peak_rss: stats.Estimate | None = None      # KiB: median peak RSS of the runs, with its 95% CI
    mean_rss: stats.Estimate | None = None      # KiB: median of each run's time-averaged RSS, with its CI
    rss_ratio: stats.Estimate | None = None     # peak RSS vs the group's smallest, paired by round
    rss_vs_fastest: float | None = None         # median peak RSS over the group's fastest cell's
    standout: set[str] = field(default_factory=set)   # evidence measures far from the group's others (standouts)
    latency: dict[str, latency_mod.Latency] = field(default_factory=dict)   # sampled per-call latency, per op
    sampling_share: float | None = None         # estimated share of region main the latency sampling took
    main_ns: stats.Estimate | None = None       # region main's ns per op
    harness_ns: stats.Estimate | None = None    # region harness's ns per op: the workload's loop alone
    own_ns: stats.Estimate | None = None        # per run, main minus harness: the allocator's own cost per op
    own_ratio: stats.Estimate | None = None     # own cost vs the group's least own cost, paired by round
    heap: Footprint | None = None               # the explaining run's heap accounting: memory.footprint
    units: UnitCosts | None = None              # the run's machine's unit costs (analysis/cost.py)
    # A program's own figure (--metric, higher is better) per CPU-second of the run: on a CPU-starved
    # machine a fixed-duration benchmark's figure tracks the CPU time it got; this one does not.
    per_cpu_s: stats.Estimate | None = None
    per_cpu_ratio: stats.Estimate | None = None  # vs the group's best per CPU-second, paired by round
    per_cpu_verdict: stats.Verdict | None = None
    # The preload-missed finding when the allocator never reached the measured program (most of the
    # sampled CPU time ran without it): the cell's figures are another allocator's, so it is not ranked.
    not_reached: "findings.Finding | None" = None

    def view(self) -> findings.CellView:
        samples = [s for _, s in self.ok_samples]
        timed = ("main",) if samples and all(s.main for s in samples) else None
        return findings.CellView(self.short_label or self.cell.label, self.cell.allocator.name, samples,
                                 self.failures, self.estimate.half_width_rel if self.estimate else None,
                                 self.warnings, timed, explain=self.cell.explain_samples, units=self.units)

    @property
    def status(self) -> str:
        if not self.ok_samples:
            return self.failures[0].status if self.failures else "error"
        if self.not_reached is not None:
            return "preload-failed"
        return "ok" if not self.failures else "partial"

    @property
    def label(self) -> str:
        if self.ok_samples:
            return "ok"
        return failure_label(self.failures[0]) if self.failures else "NO DATA"

    @property
    def harness_share(self) -> float | None:
        """The harness's median ns/op over region main's: how much of an operation is the loop."""
        if self.harness_ns is None or self.main_ns is None or not self.main_ns.median:
            return None
        return self.harness_ns.median / self.main_ns.median

    @property
    def higher_is_better(self) -> bool:
        return higher_is_better(self.metric, [s for _, s in self.ok_samples])

    def to_dict(self) -> dict:
        e = self.estimate
        return {
            "status": self.status, "metric": self.metric,
            "median": e.median if e else None, "ci_low": e.low if e else None, "ci_high": e.high if e else None,
            "ci_level": e.level if e else None, "n": e.n if e else 0, "failed": len(self.failures),
            "slower_than_best": (self.ratio.median if self.ratio else None),
            "slower_than_best_ci": ([self.ratio.low, self.ratio.high] if self.ratio else None),
            "verdict": self.verdict.text if self.verdict else None,
            "ci_half_width": e.half_width_rel if e else None,
            "warnings": [w.text for w in self.warnings],
            "findings": [f.to_dict() for f in self.findings],
            "comparison_findings": [f.to_dict() for f in self.pair_findings],
            "is_best": self.is_best, "best_resolved": self.best_resolved,
            "checksum_mismatch": self.checksum_mismatch,
            "evidence": self.evidence.to_dict(),
            "peak_rss_kb": _estimate_dict(self.peak_rss), "mean_rss_kb": _estimate_dict(self.mean_rss),
            "peak_rss_vs_smallest": _estimate_dict(self.rss_ratio),
            "latency": {op: lat.to_dict() for op, lat in self.latency.items()} or None,
            "latency_sampling_share": self.sampling_share,
            "ns_per_op": _estimate_dict(self.main_ns), "harness_ns_per_op": _estimate_dict(self.harness_ns),
            "own_ns_per_op": _estimate_dict(self.own_ns), "own_cost_vs_least": _estimate_dict(self.own_ratio),
            "heap": self.heap.to_dict() if self.heap else None,
            "per_cpu_second": _estimate_dict(self.per_cpu_s),
            "per_cpu_second_vs_best": _estimate_dict(self.per_cpu_ratio),
        }


def _estimate_dict(e: stats.Estimate | None) -> dict | None:
    return None if e is None else {"median": e.median, "ci_low": e.low, "ci_high": e.high, "n": e.n}


def per_cpu_second(sample: Sample) -> float | None:
    """The program's own figure per CPU-second (user + system) of its run."""
    cpu = (sample.user_ns + sample.sys_ns) / 1e9
    return sample.metric("output") / cpu if cpu > 0 else None


def per_op_ns(sample: Sample, region: str) -> float | None:
    r = sample.region(region)
    return r.wall_ns / r.ops if r is not None and r.ops else None


def own_cost_by_round(ok: list[tuple[int, Sample]]) -> dict[int, float]:
    """Per round, region main's ns/op minus region harness's (the workload's loop with the
    allocator calls replaced by a no-op pool, in the same process): the allocator's own cost."""
    out = {}
    for r, s in ok:
        m, h = per_op_ns(s, "main"), per_op_ns(s, "harness")
        if m is not None and h is not None:
            out[r] = m - h
    return out


def _sampling_share(ok: list[Sample]) -> float | None:
    shares = []
    for s in ok:
        info = latency_mod.sampling_info([s.result])
        main = s.region("main")
        if info is None or main is None:
            continue
        taken = latency_mod.operations_timed(s.result)
        share = latency_mod.sampling_cost_share(taken, info[1], main.wall_ns)
        if share is not None:
            shares.append(share)
    return float(sorted(shares)[len(shares) // 2]) if shares else None


def _heap_footprint(cell: StoredCell) -> Footprint | None:
    """memory.footprint of the cell's explaining run, when it accounted the heap."""
    from memsleuth.analysis import memory
    s = next((s for s in cell.explain_samples if s.heap), None)
    return memory.footprint(s) if s is not None else None


def _evidence(samples: list[Sample]) -> MedianEvidence:
    """The evidence table's row: the same medians the findings read (findings.view.Scope)."""
    if not samples:
        return MedianEvidence(scope="none")
    view = findings.CellView("", "", samples)
    sc = view.scope
    return MedianEvidence(scope="region main" if view.main else "process", user_s=sc.user_ns / 1e9, sys_s=sc.sys_ns / 1e9,
                    sys_share=sc.sys_share, minflt=sc.minflt, majflt=sc.majflt, maxrss_kb=view.maxrss_kb,
                    syscalls=Readings({k: sc.syscalls[k] for k in SYSCALLS if k in sc.syscalls}),
                    hardware=Readings({h: sc.counters[h] for h in HARDWARE_EVENTS}),
                    context_switches=sc.context_switches, unsupported=view.unsupported)


def units_of(run: StoredRun) -> UnitCosts | None:
    """The unit costs measured on the run's machine when it began; None for runs stored before."""
    return UnitCosts.from_dict(run.machine.unit_costs) if run.machine.unit_costs else None


def cell_view(cell: StoredCell, label: str = "", units: UnitCosts | None = None) -> findings.CellView:
    """A stored cell as the findings and the cases read it: its ok measured runs and its failures."""
    ok = [s for _, s in cell.measured() if s.ok]
    failed = cell.failures()
    return findings.CellView(label or cell.label, cell.allocator.name, ok, failed, explain=cell.explain_samples,
                             units=units)


def short_label(cell: StoredCell, swept: list[str]) -> str:
    """The allocator and the parameters that vary in the run: how reports name a cell."""
    return cell_label(cell.allocator.name, cell.params, swept)


def summarise_cell(cell: StoredCell, target_ci: float | None = None, swept: list[str] | None = None,
                   units: UnitCosts | None = None, metric: str | None = None) -> CellSummary:
    """`metric`: the headline to read (analyse's time_basis chooses CPU time); by default the samples'
    own (metric_kind)."""
    measured = cell.measured()
    ok = [(r, s) for r, s in measured if s.ok]
    failures = cell.failures()      # only warm-up runs exist: theirs (interrupted early, or the warm-up failed)
    metric = metric or metric_kind([s for _, s in ok])
    values = [s.metric(metric) for _, s in ok]
    estimate = stats.median_ci(values) if values else None
    checksums = {s.result.get("checksum") for _, s in ok if s.result and "checksum" in s.result}
    label = short_label(cell, swept or [])
    peaks, means = rss_series([s for _, s in ok])
    main_ns = [v for _, s in ok if (v := per_op_ns(s, "main")) is not None]
    harness_ns = [v for _, s in ok if (v := per_op_ns(s, "harness")) is not None]
    own = list(own_cost_by_round(ok).values())
    return CellSummary(cell, metric, estimate, failures, ok, _evidence([s for _, s in ok]),
                       checksum_mismatch=len(checksums) > 1,
                       warnings=(quality.cell_warnings(label, values, target_ci) + _counting(label, ok, units)
                                 if values else []),
                       short_label=label, peak_rss=stats.median_ci(peaks) if peaks else None,
                       mean_rss=stats.median_ci(means) if means else None,
                       latency=latency_mod.summarise([s.result for _, s in ok if s.result]),
                       sampling_share=_sampling_share([s for _, s in ok if s.result]),
                       main_ns=stats.median_ci(main_ns) if main_ns else None,
                       harness_ns=stats.median_ci(harness_ns) if len(harness_ns) == len(ok) and harness_ns else None,
                       own_ns=stats.median_ci(own) if own and len(own) == len(ok) else None,
                       heap=_heap_footprint(cell), units=units,
                       per_cpu_s=_per_cpu_estimate(metric, [s for _, s in ok]))


def _counting(label: str, ok: list, units: UnitCosts | None) -> list[quality.QualityWarning]:
    """The cell's warning that memsleuth's counting of its system calls cost a material share of it;
    none where the timed runs counted none (their counts are a warm-up's: Sample.syscalls_from)."""
    if any(s.syscalls_from for _, s in ok):
        return []
    w = quality.counting_cost(label, findings.CellView("", "", [s for _, s in ok]).scope, units)
    return [w] if w else []


def rss_series(ok: list[Sample]) -> tuple[list[float], list[float]]:
    """Each run's peak RSS, and each run's time-averaged RSS only when every one of those runs has
    one: the two medians (and their CIs' order statistics) are then taken over the same runs, and
    since every run's average is at most its own peak, the summaries are ordered by construction.
    Medians over different runs were not: a run too short for a timeline left the averages' median
    above the peaks' (2,120 KiB against 2,072 KiB beside two busy loops)."""
    runs = [s for s in ok if s.maxrss_kb]
    means = [s.mean_rss_kb for s in runs]
    return [float(s.maxrss_kb) for s in runs], ([float(m) for m in means] if runs and None not in means else [])


def _per_cpu_estimate(metric: str, ok: list[Sample]) -> stats.Estimate | None:
    if metric != "output" or not higher_is_better(metric, ok):
        return None
    vals = [v for s in ok if (v := per_cpu_second(s)) is not None]
    return stats.median_ci(vals) if vals and len(vals) == len(ok) else None


@dataclass
class Group:
    """The cells that share parameter values: the allocators being compared."""
    params: dict
    cells: list[CellSummary]
    checksum_mismatch: bool = False
    runner_up: CellSummary | None = None      # the cell nearest the fastest (smallest paired ratio)
    least_rss: CellSummary | None = None      # the cell with the least median peak RSS
    time_basis: "TimeBasis | None" = None     # whole-process time: why CPU time (or wall) is the verdict's


# Whole-process time (no probe region, no --metric): the verdict is read from the process tree's CPU
# time (user + system, paired by round) instead of its wall time where the program is CPU-bound and
# the wall time is noisier than the CPU time by NOISIER or more (the widest cell's relative CI
# half-width): other work on the machine stretched the wall time without changing the work done.
# CPU-bound: its CPU time at least CPU_BOUND of its wall time in every cell, or, on a machine whose
# other work kept it waiting for a CPU (then it runs less than its wall time without ever waiting
# itself), at most MAX_BLOCKS_PER_CPU_S voluntary context switches per second of CPU time in every
# cell: a program that waits for I/O, a lock or another process blocks, and is counted each time.
# Otherwise wall time stays, and the report says how noisy each was.
CPU_BOUND = 0.8
MAX_BLOCKS_PER_CPU_S = 50.0
NOISIER = 1.5


@dataclass(frozen=True)
class TimeBasis:
    metric: str               # "cpu_s" or "wall_s"
    cpu_per_wall: float       # the lowest cell's median CPU time over wall time
    blocks_per_cpu_s: float   # the highest cell's median voluntary context switches per CPU second
    wall_half: float          # the widest cell's relative 95% CI half-width, wall time
    cpu_half: float           # the same, CPU time


def _half_width(values: list[float]) -> float | None:
    e = stats.median_ci(values) if len(values) >= 2 else None
    if e is None or e.low is None or not e.median:
        return None
    return (e.high - e.low) / 2 / e.median


def time_basis(cells: list[StoredCell]) -> TimeBasis | None:
    """Which time judges a group of cells measured by their whole process (TimeBasis, CPU_BOUND,
    NOISIER); None where the cells have another metric or too few runs to tell."""
    runs = [[s for _, s in c.measured() if s.ok] for c in cells]
    runs = [r for r in runs if r]
    if len(runs) < 2 or any(metric_kind(r) != "wall_s" for r in runs):
        return None
    ratios = [stats.median_of([(s.user_ns + s.sys_ns) / s.wall_ns for s in r if s.wall_ns]) for r in runs]
    blocks = [stats.median_of([s.nvcsw / ((s.user_ns + s.sys_ns) / 1e9) for s in r if s.user_ns + s.sys_ns])
              for r in runs]
    walls = [_half_width([s.wall_ns / 1e9 for s in r]) for r in runs]
    cpus = [_half_width([(s.user_ns + s.sys_ns) / 1e9 for s in r]) for r in runs]
    if None in walls or None in cpus or None in ratios or None in blocks:
        return None
    wall_half, cpu_half, bound, blocked = max(walls), max(cpus), min(ratios), max(blocks)
    cpu_bound = bound >= CPU_BOUND or blocked <= MAX_BLOCKS_PER_CPU_S
    cpu = cpu_bound and wall_half >= NOISIER * cpu_half
    return TimeBasis("cpu_s" if cpu else "wall_s", bound, blocked, wall_half, cpu_half)

# The evidence table marks a value at least this many times its group's smallest, and by at
# least this much in absolute terms (so 3 brk calls against 1 is not a difference worth the eye).
STANDOUT_FACTOR = 2.0
STANDOUT_MIN_EVENTS = 100
STANDOUT_MIN_SYS_POINTS = 10
STANDOUT_MIN_RSS_MIB = 16


def _measures(c: CellSummary) -> dict[str, tuple[float | None, float]]:
    """A cell's evidence measures as the evidence table names them: (value, the absolute floor)."""
    e = c.evidence
    out = {"sys %": (100 * e.sys_share if e.sys_share is not None else None, STANDOUT_MIN_SYS_POINTS),
           "minor faults": (e.minflt, STANDOUT_MIN_EVENTS), "major faults": (e.majflt, STANDOUT_MIN_EVENTS),
           "peak RSS": (e.maxrss_kb / 1024 if e.maxrss_kb is not None else None, STANDOUT_MIN_RSS_MIB)}
    for name in SYSCALL_COLUMNS:
        out[name] = (e.syscalls[name], STANDOUT_MIN_EVENTS)
    return out


def standouts(ok: list[CellSummary]) -> None:
    """Sets each cell's `standout`: the measures at least STANDOUT_FACTOR times the smallest among
    the cells and beyond it by the measure's floor (where the cells differ)."""
    if len(ok) < 2:
        return
    table = [(c, _measures(c)) for c in ok]
    for name in table[0][1]:
        vals = [(c, m[name][0]) for c, m in table if m[name][0] is not None]
        if len(vals) < 2:
            continue
        low = min(v for _, v in vals)
        floor = table[0][1][name][1]
        for c, v in vals:
            if v >= STANDOUT_FACTOR * max(low, 1e-9) and v - low >= floor:
                c.standout.add(name)


def _metric_by_round(c: CellSummary) -> dict[int, float]:
    return {r: s.metric(c.metric) for r, s in c.ok_samples}


def compare_group(cells: list[CellSummary], noise: float = stats.DEFAULT_NOISE) -> Group:
    for c in cells:
        if c.estimate is not None and c.cell.allocator.preloaded:
            missed = findings.preload_missed.check(c.view())
            if missed and missed[0].numbers["cpu_share"] >= findings.preload_missed.MOST:
                c.not_reached = missed[0]
                c.findings = missed          # its own figures are not this allocator's: nothing else is said
    ok = [c for c in cells if c.estimate is not None and c.not_reached is None]
    group = Group(cells[0].cell.params if cells else {}, cells)
    if ok and len({c.metric for c in ok}) == 1:
        hib = ok[0].higher_is_better
        best = max(ok, key=lambda c: c.estimate.median) if hib else min(ok, key=lambda c: c.estimate.median)
        best.is_best = True
        best_rounds = _metric_by_round(best)
        for c in ok:
            mine = _metric_by_round(c)
            common = sorted(set(mine) & set(best_rounds))
            if not common:
                continue
            # "how many times slower than the best", per round: best/mine for throughput, mine/best for time.
            num = [best_rounds[r] for r in common] if hib else [mine[r] for r in common]
            den = [mine[r] for r in common] if hib else [best_rounds[r] for r in common]
            c.ratio = stats.paired_ratio(num, den)
            if c is not best:
                c.verdict = stats.verdict(c.ratio, noise)
                if c.verdict.kind == "slower":
                    c.pair_findings = findings.for_pair(c.view(), best.view())
    per_cpu = [c for c in ok if c.per_cpu_s is not None]
    if len(per_cpu) == len(ok) and len(ok) > 1:
        top = max(per_cpu, key=lambda c: c.per_cpu_s.median)
        top_rounds = {r: v for r, s in top.ok_samples if (v := per_cpu_second(s)) is not None}
        for c in per_cpu:
            mine = {r: v for r, s in c.ok_samples if (v := per_cpu_second(s)) is not None}
            c.per_cpu_ratio = stats.paired_by_round(top_rounds, mine)   # >= 1: how much less per CPU-second
            if c is not top and c.per_cpu_ratio is not None:
                c.per_cpu_verdict = stats.verdict(c.per_cpu_ratio, noise)
    if ok:
        best = next((c for c in ok if c.is_best), None)
        if best is not None:
            # "fastest" only when the data resolve it: some other cell slower beyond the noise.
            best.best_resolved = any(c.verdict is not None and c.verdict.kind == "slower" for c in ok)
            others = sorted((c for c in ok if c is not best and c.ratio is not None), key=lambda c: c.ratio.median)
            group.runner_up = others[0] if others else None
            for c in ok:
                if c.peak_rss is not None and best.peak_rss is not None and best.peak_rss.median:
                    c.rss_vs_fastest = c.peak_rss.median / best.peak_rss.median
    smallest = min((c for c in ok if c.peak_rss), key=lambda c: c.peak_rss.median, default=None)
    if smallest is not None:
        small_rounds = {r: s.maxrss_kb for r, s in smallest.ok_samples if s.maxrss_kb}
        for c in ok:
            mine = {r: s.maxrss_kb for r, s in c.ok_samples if s.maxrss_kb}
            c.rss_ratio = stats.paired_by_round(mine, small_rounds)
    group.least_rss = smallest
    standouts(ok)
    least = min((c for c in ok if c.own_ns is not None), key=lambda c: c.own_ns.median, default=None)
    # A least own cost at or below zero (the harness as slow as the whole loop: 16 threads of
    # threads-stress on 16 cores gave -1.4 to 3.4 ns) leaves no ratio to take: none is given.
    if least is not None and least.own_ns.median > 0:
        base = own_cost_by_round(least.ok_samples)
        for c in ok:
            mine = own_cost_by_round(c.ok_samples)
            # Per round, own cost over the least's own cost; a round whose own cost is not positive (the
            # harness as slow as the whole loop: noise) has no ratio.
            c.own_ratio = stats.paired_by_round({r: v for r, v in mine.items() if v > 0},
                                                {r: v for r, v in base.items() if v > 0})
    for c in ok:
        c.findings = findings.for_cell(c.view())
    attribute(ok)
    for c in ok:
        c.findings = with_call_sites(c.findings, c.cell.where)
    sums = {next(iter({s.result.get('checksum') for _, s in c.ok_samples if s.result} or {None}))
            for c in ok}
    sums.discard(None)
    group.checksum_mismatch = len(sums) > 1 or any(c.checksum_mismatch for c in cells)
    return group


# Who makes the calls, from their counts across the allocators of one group (the same
# parameters, interleaved): each count's run-to-run spread under one allocator is measured, and
# only a difference between allocators beyond it says anything (issue 20, item 4).
# - "program": every allocator's runs overlap every other's range, and the medians lie within
#   SAME_COUNT of each other: the allocator changed and the calls did not;
# - "allocator": the ranges are disjoint and the gap between the medians is larger than the widest
#   range under one allocator, for a work-fixed measure (region main's ops, or a command that does
#   the same work each run); never for futex, whose count follows the threads' timing, which any
#   allocator changes, and never for a fixed-duration benchmark (--metric), where a faster
#   allocator pushes more of the program's own calls through in the same time.
# Anything else: the counts do not decide; call sites (sites.py) decide whenever they exist.
SAME_COUNT = 0.9
TIMING_DEPENDENT = ("futex",)
PROGRAM_ADVICE = ("the program itself makes these calls, whatever the allocator: change the program (its own pool, "
                  "lock or buffer handling); tuning or replacing the allocator will not remove them")
# What the program changes, by the call its own code makes (the finding's `calls`).
PROGRAM_CHANGES = {
    "munmap": "keep its mappings and reuse them (a pool of buffers) instead of mapping and unmapping one per use",
    "mmap": "keep its mappings and reuse them (a pool of buffers) instead of mapping and unmapping one per use",
    "madvise": "purge what it frees less often (keep a reserve for reuse, or MADV_FREE instead of MADV_DONTNEED)",
    "mremap": "reserve the final size, or grow by larger steps, instead of growing its buffers a little per step",
    "brk": "keep the memory it frees for reuse instead of moving the break back per cycle",
    "futex": "hold its locks for less time, or split them (per thread, per shard), so threads wait less",
    "mprotect": "change protections once per region (a guard page set when a stack is made, kept while it is "
                "reused) instead of per task or per object",
}


def program_advice(call: str | None) -> str:
    """The advice when the program's own code makes the finding's calls (who == "program")."""
    change = PROGRAM_CHANGES.get(call or "")
    if change is None:
        return PROGRAM_ADVICE
    return (f"the program itself makes these calls, whatever the allocator: change the program: {change}; tuning or "
            "replacing the allocator will not remove them")


def _run_counts(c: CellSummary, call: str) -> list[float]:
    """The call's count in each ok run of a cell that counted it, from the scope its evidence reads:
    the timed runs' own, or where they counted none, each of the cell's counting runs once (one such
    run has no spread to weigh a difference against, so it decides nothing)."""
    out = []
    runs = [s for _, s in c.ok_samples]
    if any(s.syscalls_from for s in runs):
        runs = c.cell.counting_samples
    for s in runs:
        src = s.main.syscalls if c.evidence.scope == "region main" and s.main is not None else s.syscalls
        if call in src:
            out.append(float(src[call]))
    return out


def count_attribution(per_cell: dict[str, list[float]], work_fixed: bool, call: str) -> tuple[str, str] | None:
    """(who, evidence line) from per-run counts under each allocator, or None when they decide
    nothing. Pure: tested on stored counts (tests/unit)."""
    per = {k: sorted(v) for k, v in per_cell.items() if v}
    if len(per) < 2 or any(len(v) < 2 for v in per.values()):
        return None
    med = {k: stats.median_of(v) for k, v in per.items()}
    widest = max(v[-1] - v[0] for v in per.values())
    shown = ", ".join(f"{k} {med[k]:,.0f} [{v[0]:,.0f}-{v[-1]:,.0f}]" for k, v in per.items())
    lo, hi = min(med, key=med.get), max(med, key=med.get)
    if not med[hi]:
        return None
    overlap = max(v[0] for v in per.values()) <= min(v[-1] for v in per.values())
    if overlap and med[lo] >= SAME_COUNT * med[hi]:
        return "program", (f"{call} calls per run under each allocator (median [range]): {shown}: the same within "
                           "their run-to-run spread, so the program makes them")
    disjoint = per[hi][0] > per[lo][-1] and med[hi] - med[lo] > widest
    if not disjoint:
        return None
    if call in TIMING_DEPENDENT or not work_fixed:
        why = ("futex counts follow the threads' timing, which every allocator changes" if call in TIMING_DEPENDENT
               else "the benchmark runs for a fixed time, so a faster allocator also pushes more of the program's own "
                    "calls through")
        return "undetermined", (f"{call} calls per run under each allocator (median [range]): {shown}: they change "
                                f"with the allocator beyond their spread, but {why}: the call sites decide (--where)")
    return "allocator", (f"{call} calls per run under each allocator (median [range]): {shown}: they change with the "
                         "allocator by more than their run-to-run spread, so the allocator makes them")


def attribute(cells: list[CellSummary]) -> None:
    """Marks each finding that names a syscall with who makes those calls (count_attribution)."""
    if len({c.cell.allocator.name for c in cells}) < 2:
        return
    for c in cells:
        for i, f in enumerate(c.findings):
            if not f.calls:
                continue
            counts = {x.cell.contender: _run_counts(x, f.calls) for x in cells}
            got = count_attribution(counts, c.metric != "output", f.calls)
            if got is None:
                once = [k for k, v in counts.items() if len(v) == 1]
                if once and any(s.syscalls_from for x in cells for _, s in x.ok_samples):
                    c.findings[i] = replace(f, who_why=(
                        f"the {f.calls} calls were counted once per allocator for {', '.join(once)} (in one warm-up: the "
                        "timed rounds count none), which leaves no run-to-run spread to weigh their difference "
                        "against: give --warmup 2 or more, or record the call sites (--where)"))
                continue
            who, line = got
            # a rule's own advice already fits a program's mechanism; a decision for the program replaces one for
            # the allocator
            c.findings[i] = replace(f, who=who, evidence=[*f.evidence, line],
                                    advice=f.with_advice(program_advice(f.calls)) if who == "program" != f.who
                                    else f.advice)


# The events whose call sites explain each finding: its system call, and the faults it causes.
SITE_EVENTS = {"heap-trim-churn": ("brk", "page-faults"), "mmap-churn": ("munmap", "page-faults"),
               "mremap-churn": ("mremap", "page-faults"), "madvise-storm": ("madvise",),
               "lock-contention": ("futex",), "first-touch": ("page-faults",), "rss-growth": ("page-faults",),
               "zero-page-read": ("page-faults",), "kernel-time": ("page-faults",), "madvise-calls": ("madvise",),
               "mprotect-calls": ("mprotect",)}
# Findings that hold anonymous resident memory against malloc's live bytes: memory a runtime maps
# itself (a collected heap, a JIT's code, obmalloc's arenas) is not malloc's to explain, so where the
# mapping calls' sites are a runtime's own code these findings do not speak (runtimes.runtime_of).
MALLOC_MEMORY_FINDINGS = ("heap-overhead",)


# At least this share of a call's sampled paths through malloc/free: the allocator makes the calls; at most
# THROUGH_PROGRAM: the program's code makes them straight.
THROUGH_ALLOCATOR, THROUGH_PROGRAM = 0.8, 0.2


def mapped_by(where: CallSites | None):
    """(the runtime, its share) whose own code made the sampled mmap calls; None where no runtime did
    (or they were not sampled)."""
    e = where.events["mmap"] if where else None
    if e is None:
        return None
    return runtimes.runtime_of(e.makers or e.user_sites) or runtimes.runtime_of(e.maker_objects)


def _first_event(finding: str, where: CallSites):
    """A finding without calls of its own (first-touch: faults): its first site event and its words."""
    name = next(iter(SITE_EVENTS.get(finding, ())), None)
    e = where.events[name] if name else None
    return (e, name.replace("-", " ")) if e else (None, "")


def _faults_elsewhere(f: findings.Finding, made, where: CallSites) -> str | None:
    """Where a finding's cost is also the faults its calls cause (churn) and a process tree's programs
    split them: the evidence line that the program making most of the sampled calls took under
    1 - runtimes.MIN_SHARE of the sampled faults, so the calls' code (a runtime's, installed code)
    does not name the culprit; None where one program makes both, or the samples do not say. A shell
    script ran a C program that maps and frees 32 MiB per step, then a Python one-liner whose 100
    bytearrays are unmapped at its exit: the 84% of munmap calls from python3 made the finding
    CPython's, advising bytearray reuse, for faults that were the C program's."""
    faults = where.events["page-faults"]
    if made is None or not f.calls or "page-faults" not in SITE_EVENTS.get(f.id, ()) or faults is None \
            or not made.commands or not faults.commands:
        return None
    comm, share = made.commands[0]
    took = sum(k for c, k in faults.commands if c == comm)
    if share < runtimes.MIN_SHARE or took >= 1 - runtimes.MIN_SHARE:
        return None
    payer, paid = faults.commands[0]
    return (f"{share:.0%} of the sampled {f.calls} calls come from {comm}, which took {took:.0%} of the sampled page "
            f"faults ({payer}: {paid:.0%}): the calls' own code does not name who pays for them")


# glibc's pthread_once (and std::call_once, which calls it) wakes the futex after every one-time
# initialization, whether or not a thread waits for it: those calls are no lock's contention. rustc
# and its linker (cargo build: LLVM initializes each target once) made 1,258 futex calls, 80% of
# the sampled ones __pthread_once_slow -> futex_wake, and read "threads wait for each other".
ONCE_FRAMES = ("__pthread_once_slow",)


def once_share(e) -> float:
    """The share of an event's sampled calls made by pthread_once's wake (its internal paths)."""
    paths = e.internal_paths if e is not None else None
    return sum(share for path, share in paths or () if any(k in path for k in ONCE_FRAMES))


def with_call_sites(found: list[findings.Finding], where: CallSites | None) -> list[findings.Finding]:
    """Each finding with the call sites of its events; and who makes the calls from the stacks,
    through malloc/free (the allocator) or not: the strongest evidence, so it decides over the
    counts across allocators (attribute) whenever enough stacks reached the program's code."""
    if not where:
        return found
    from memsleuth.records import sites as where_mod
    out = []
    owner = mapped_by(where)
    for f in found:
        if f.id in MALLOC_MEMORY_FINDINGS and owner is not None:
            continue    # the runtime's own heap: neither overhead of malloc's nor the allocator's to change
        events = tuple(dict.fromkeys((*((f.calls,) if f.calls else ()), *SITE_EVENTS.get(f.id, ()))))
        lines = [line for e in events for line in where_mod.lines_for(where, e)]
        who, extra, via_malloc = f.who, [], False
        e = where.events[f.calls or ""]
        # the whole process's rate (the region rule's is per operation: its calls are the region's own)
        once = once_share(e) if f.id == "lock-contention" and "futex_per_s" in f.numbers else 0.0
        if once:
            rest = f.numbers["futex_per_s"] * (1 - once) / findings.lock_contention.FUTEX_PER_S
            if rest < 1:
                continue    # without pthread_once's wakes, too few futex calls to speak of a lock
            f = replace(f, confidence=confidence_from_margin(rest))
        through = None
        if e and e.internal_paths is not None:
            through = e.through_allocator
            if through is None:  # stored before the share was recorded: read it from the top paths
                through = sum(share for path, share in e.internal_paths
                              if any(k in path for k in where_mod.ALLOCATOR_FRAMES))
            # whether a runtime's calls go through malloc's free needs no frame of the program's own
            # code (a JVM's Cleaner thread frees direct buffers: its stacks never reach Java's)
            via_malloc = through >= THROUGH_ALLOCATOR
        built = e.built_in[0] if e and e.built_in and f.calls and f.id != "lock-contention" else None
        built = built if built is not None and built[1] >= THROUGH_ALLOCATOR else None
        if e and through is not None and e.unwound_share >= where_mod.MIN_UNWOUND and built is None:
            decided = "allocator" if through >= THROUGH_ALLOCATOR else "program" if through <= THROUGH_PROGRAM else None
            if decided is not None:
                share = through if decided == "allocator" else 1 - through
                extra = [f"{share:.0%} of the sampled {f.calls} calls come "
                         + ("through the allocator (malloc/free)" if decided == "allocator"
                            else "straight from the program's code, not through malloc/free")
                         + ("" if f.who in ("undetermined", decided) else
                            f": the call sites decide, over the counts across allocators (which said {f.who})")]
                who = decided
                if decided == "allocator" and f.id in findings.ALLOCATOR_MADE:
                    f = findings.ALLOCATOR_MADE[f.id](f)
        # The stacks decided for the program: its own change. A rule that already named the program (a leak, its
        # own pool) keeps its advice, which fits its mechanism.
        advice = program_advice(f.calls) if who == "program" != f.who else f.advice
        if who != "program" and f.advice == program_advice(f.calls):   # the counts said program, the stacks do not
            advice = ("the allocator makes these calls: its options that delay returning memory to the kernel, or "
                      "another allocator (compare them with `memsleuth compare`)")
        numbers = f.numbers
        # who made the calls (or, for a finding about faults, the faults): the frames that made them,
        # else the objects their code is in (stored before "makers": the sites themselves)
        made, what = (e, f"{f.calls} calls") if e else _first_event(f.id, where)
        other = _faults_elsewhere(f, made, where)
        if other:   # a process tree: the calls' program is not the one that pays for them in faults
            extra, made = [*extra, other], None
        rt = (runtimes.runtime_of(made.makers or made.user_sites) or runtimes.runtime_of(made.maker_objects)) \
            if made else None
        if rt is not None:
            # The calls come from a managed runtime's own code: its knobs, never the allocator's.
            runtime, share = rt
            if f.id == "lock-contention" and runtime.contention_is_runtime:
                continue    # its scheduler parks idle threads on futexes: no lock is shown contended
            # its code's calls through malloc's free: malloc's blocks, which the allocator's side reaches too
            mallocs = via_malloc and runtime.own_memory and f.id in runtimes.RELEASE_FINDINGS
            who, numbers = "runtime", {**f.numbers, "runtime": runtime.name, **({"via_malloc": 1} if mallocs else {})}
            extra = [f"{share:.0%} of the sampled {what} come from {runtime.name}'s own code"]
            own = runtimes.advice_for(runtime, f.id, via_malloc)
            if own is not None:
                advice = "; ".join([own, *runtimes.library_advice(made.makers or made.user_sites)])
                if (not runtime.own_memory or mallocs) and f.advice != program_advice(f.calls) and \
                        f.id != "lock-contention":
                    # its memory is malloc's: that side too (not its own locks')
                    advice += f"; on the allocator's side: {f.advice}" if e else f"; {f.advice}"
            elif advice == program_advice(f.calls):
                advice = f.advice   # the rule's own words: the runtime, not the program's code, makes the calls
        elif made is not None and who != "allocator" and \
                (installed := sum(k for _, k in made.installed_objects)) >= runtimes.MIN_SHARE:
            # Installed code no table names (an interpreter's own allocator, a library's pool): not the
            # program's to change, and maybe the allocator's after all, where that code can use malloc.
            objs = ", ".join(o.strip("()") for o, _ in made.installed_objects[:3])
            who, numbers = "runtime", {**f.numbers, "runtime": f"installed code memsleuth has no table for ({objs})"}
            extra = [f"{installed:.0%} of the sampled {what} come from installed code memsleuth has no table for: "
                     f"{objs} (a runtime, an interpreter or a library, not the program's own build)"]
            advice = (f"the {what} come from {objs}, not from code built here: its own settings may change them "
                      "(many runtimes and interpreters can use malloc instead of their own allocator)")
            if f.advice != program_advice(f.calls):
                advice += f"; where it takes its memory from malloc: {f.advice}"
        if once:
            extra = [*extra, f"{once:.0%} of the sampled futex calls are pthread_once's wake after a one-time "
                             "initialization, made whether or not a thread waits: no lock's contention"]
        if built is not None:
            # the allocator is the program's own code here: its settings, never "change the program" or a preload
            name = built[0].split(" (")[0]
            who, numbers = "allocator", {**numbers, "built_in_allocator": name}
            extra = [*extra, f"{built[1]:.0%} of the sampled {f.calls} calls come from {built[0]}: an allocator "
                             "compiled into the program, which a preloaded allocator does not replace"]
            # its own settings, read from the environment (tries.PURGE_LATER: what --try sets for it)
            purge = tries.built_in_purge_later(name) if f.id in tries.BUILT_IN_PURGES else {}
            advice = f"{name} is compiled into the program: its own settings reach it, not a preloaded allocator" + (
                "; to return freed memory to the kernel later: " + " ".join(f"{k}={v}" for k, v in purge.items())
                if purge else "")
        out.append(replace(f, call_sites=lines, who=who, evidence=[*f.evidence, *extra], advice=f.with_advice(advice),
                           numbers=numbers))
    return out



def analyse(run: StoredRun, cpu_time: bool = True) -> list[Group]:
    """The run's groups of compared cells. `cpu_time`: a group measured by its whole process may be
    judged by CPU time (time_basis); False keeps wall time (diff and trend compare runs, which must be
    read alike)."""
    swept = run.spec.swept
    by_params: dict[tuple, list[CellSummary]] = {}
    cells_by: dict[tuple, list[StoredCell]] = {}
    for cell in run.cells:
        cells_by.setdefault(tuple(cell.params.get(k) for k in swept), []).append(cell)
    groups = []
    for key, cells in cells_by.items():
        basis = time_basis(cells) if cpu_time else None
        metric = basis.metric if basis is not None and basis.metric == "cpu_s" else None
        by_params[key] = [summarise_cell(c, run.spec.target_ci, swept, units_of(run), metric) for c in cells]
        group = compare_group(by_params[key], run.spec.noise)
        group.time_basis = basis
        groups.append(group)
    return groups


# Findings about the measurement, not about a mechanism that costs the program something.
MEASUREMENT_FINDINGS = ("unstable-measurement", "counters-unavailable")


def quiet_line(views: list[findings.CellView], found: list[findings.Finding]) -> str | None:
    """The one line for a run in which no mechanism finding fired: what the largest part of the
    kernel time was (findings.quiet_line, for the cell where it is largest)."""
    if any(f.id not in MEASUREMENT_FINDINGS for f in found):
        return None
    lines = []
    for v in views:
        sc = v.scope
        if sc is None:
            continue
        split = v.kernel_split(sc, upper_bound=False)
        lines.append((max((split.share(x) for x in split.parts.values()), default=0.0), v))
    if not lines:
        return None
    share, view = max(lines, key=lambda t: t[0])
    line = findings.quiet_line(view)
    return line if len(lines) == 1 or line is None else line.replace("this run's", "any cell's", 1) + \
        f" (largest in {view.label})"


@dataclass
class Standings:
    """What a comparison resolved, for the report's first lines: per contender, where it is fastest
    (the parameter set, the resolved slower ones' lowest and highest ratio, the contenders not
    resolved from it); where no winner is resolved; per contender, where its peak RSS is the
    smallest, resolved against every other."""
    wins: dict[str, list[tuple[str, float, float, list[str]]]] = field(default_factory=dict)
    unresolved: list[str] = field(default_factory=list)
    smallest: dict[str, list[str]] = field(default_factory=dict)
    bases: list[tuple[str, TimeBasis]] = field(default_factory=list)   # where whole-process time was judged, how
    # of `unresolved`: where the paired ratios had too few rounds for any CI, with the rounds they had and
    # the cells there, the lowest median first (its medians are no verdict)
    too_few: dict[str, tuple[int, list[CellSummary]]] = field(default_factory=dict)


def standings(groups: list[Group], swept: list[str]) -> Standings:
    """Who is fastest where (only where the paired ratios resolve it), where no winner is resolved,
    and who has the smallest peak RSS (only where its paired ratio to every other resolves it).
    From the groups' own verdicts; nothing beyond them."""
    def where(g: Group) -> str:
        shown = ", ".join(f"{k}={g.params.get(k)}" for k in swept if k in g.params and k != "variant")
        return shown or "the one parameter set"

    wins: dict[str, list[tuple[str, float, float, list[str]]]] = {}
    unresolved: list[str] = []
    smallest: dict[str, list[str]] = {}
    too_few: dict[str, tuple[int, list[CellSummary]]] = {}
    for g in groups:
        ok = [c for c in g.cells if c.estimate is not None]
        if len(ok) < 2:
            continue
        best = next((c for c in ok if c.is_best), None)
        if best is not None and best.best_resolved:
            slower = [c.ratio.median for c in ok if c is not best and c.verdict and c.verdict.kind == "slower"]
            tied = [c.cell.contender for c in ok if c is not best and not (c.verdict and c.verdict.kind == "slower")]
            wins.setdefault(best.cell.contender, []).append((where(g), min(slower), max(slower), tied))
        else:
            unresolved.append(where(g))
            others = [c.ratio for c in ok if c is not best and c.ratio is not None]
            if others and all(r.low is None for r in others):
                too_few[where(g)] = (min(r.n for r in others), sorted(
                    ok, key=lambda c: (not c.is_best, c.ratio.median if c.ratio is not None else float("inf"))))
        least = g.least_rss
        if least is not None and all(c is least or (c.rss_ratio is not None and c.rss_ratio.low is not None
                                                    and c.rss_ratio.low > 1.0) for c in ok if c.peak_rss):
            smallest.setdefault(least.cell.contender, []).append(where(g))
    return Standings(wins, unresolved, smallest, [(where(g), g.time_basis) for g in groups if g.time_basis], too_few)


@dataclass
class RunAnalysis:
    """Everything the compare report and the JSON export show, computed once."""
    groups: list[Group]
    findings: list[findings.Finding]          # about the run as a whole (what could not be measured)
    machine_warnings: list[quality.QualityWarning]
    quiet: str | None = None                  # no mechanism is material: the line that says so
    standings: Standings = field(default_factory=Standings)   # what the comparison resolved
    latency_sampling: tuple[int, float] | None = None  # (calls between timed ones, one clock read in ns)

    @property
    def all_findings(self) -> list[findings.Finding]:
        return [f for g in self.groups for c in g.cells for f in c.findings + c.pair_findings] + self.findings


def analyse_run(run: StoredRun) -> RunAnalysis:
    groups = analyse(run)
    views = [c.view() for g in groups for c in g.cells]
    a = RunAnalysis(groups, findings.for_run(views),
                    quality.machine_warnings(run.machine) + quality.fixed_wall_time(
                        [(c.metric, c.estimate.median, [s for _, s in c.ok_samples])
                         for g in groups for c in g.cells if c.estimate is not None]))
    a.quiet = quiet_line([v for v in views if v.samples], a.all_findings)
    a.standings = standings(groups, list(run.spec.swept))
    a.latency_sampling = latency_mod.sampling_info([s.result for g in groups for c in g.cells if c.latency
                                                    for _, s in c.ok_samples if s.result])
    return a


@dataclass
class CheckAnalysis:
    """`memsleuth check`: one program, its regions, its whole process, and the findings."""
    cell: StoredCell
    measured: list[Sample]
    failed: list[Sample]
    view: findings.CellView
    regions: list[tuple[findings.view.Scope, int]]   # medians per occurrence, occurrences per run
    findings: list[findings.Finding]
    quiet: str | None = None                          # no mechanism is material: the line that says so
    summary: CellSummary | None = None                # the cell as compare summarises it (the JSON export)
    untried: list[str] = field(default_factory=list)  # the candidate changes `check --try` would measure
    cpu_time: list = field(default_factory=list)      # cpu_time.Part: the sampled CPU time by kernel path
    # (sampled, measured) CPU ns when the explaining run's CPU time is outside EXPLAINING_CPU_RANGE of
    # the measured runs' (its instrumentation slowed the program): its shares are its own.
    explaining_cpu_apart: tuple[float, float] | None = None
    attached: bool = False                            # check --pid: one window, measured and explaining at once
    who_ran: list = field(default_factory=list)       # user_time.Part: the sampled CPU time by who ran it
    counting: quality.QualityWarning | None = None    # memsleuth's counting of the calls cost a material share


def analyse_check(run: StoredRun) -> CheckAnalysis:
    cell = run.cells[0]
    measured = [s for _, w, s in cell.samples if not w]
    ok = [s for s in measured if s.ok]
    # A failed warm-up (or preload check) ends the cell before any measured run: it is the result. A
    # failed explaining run is not: the header says what it did not gather.
    failed = cell.failures()
    # A crashed run's regions and counters up to the crash are evidence too.
    view = findings.CellView(cell.allocator.name, cell.allocator.name, ok or measured, failed,
                             explain=cell.explain_samples, units=units_of(run), window=run.attached is not None)
    names = list(dict.fromkeys(r.name for s in view.samples for r in s.regions))
    own = with_call_sites(findings.for_cell(view), cell.where)
    found = own + findings.for_run([view])
    summary = summarise_cell(cell, run.spec.target_ci, [], units_of(run))
    summary.findings = own          # the cell's own, as compare's summaries hold them; the run's are in findings
    # Another allocator cannot reach a program that LD_PRELOAD does not (a static executable).
    others = list(tries.OTHER_ALLOCATORS) if view.preload_reaches_program is not False else []
    untried = [t.name for t in tries.for_findings(found, cell.allocator.name, others, list(cell.command),
                                                  (run.machine.mem_total_kb or 0) * 1024 if run.machine else None)]
    p = view.profile
    cpu_time = cpu_time_mod.breakdown(p) if p is not None and p.samples else []
    whole = view.process
    measured_ns = (whole.user_ns + whole.sys_ns) if whole else 0.0
    sampled_ns = p.samples * float(p.period_ns) if p is not None else 0.0
    apart = (sampled_ns, measured_ns) if cpu_time and measured_ns and \
        not EXPLAINING_CPU_RANGE[0] <= sampled_ns / measured_ns <= EXPLAINING_CPU_RANGE[1] else None
    attached = run.attached is not None
    return CheckAnalysis(cell, measured, failed, view, [view.occurrences(n) for n in names], found,
                         quiet_line([view] if view.samples else [], found), summary, [] if attached else untried,
                         cpu_time, apart, attached, user_time.who_ran(view.cpu_stacks),
                         quality.counting_cost(cell.allocator.name, whole, units_of(run)) if whole else None)


# The explaining run's CPU time against the measured runs' beyond which check says the samples'
# shares are the explaining run's own (its instrumentation slowed the program).
EXPLAINING_CPU_RANGE = (0.8, 1.25)
