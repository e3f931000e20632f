"""Measurement-quality warnings, each with an explicit threshold (docs/statistics.md says why).

They read the stored samples and machine info; they never change a number, only say how far to
trust it.
"""
from __future__ import annotations

from dataclasses import dataclass

from memsleuth import stats
from memsleuth.analysis import cost
from memsleuth.records.model import MachineInfo

CV_WARN = 0.05             # run-to-run spread above 5% of the mean: medians move between runs
FIRST_OUTLIER_Z = stats.OUTLIER_Z   # the first measured run far from the rest: a cold start leaked past the warm-up
MAD_OUTLIER_Z = stats.OUTLIER_Z     # any run that far from the median
LOAD_PER_CPU_WARN = 0.5    # 1-minute load per CPU above which other work competes for the cores
MIN_FOR_OUTLIERS = 3       # a median and a MAD need three values before one can stand out


@dataclass(frozen=True)
class QualityWarning:
    code: str      # cv, first-outlier, outliers, load, governor, few-samples, target-not-reached, counting
    subject: str   # the cell's label, or "machine"
    text: str


def cell_warnings(label: str, values: list[float], target_ci: float | None = None) -> list[QualityWarning]:
    """Warnings about one cell's measured values (in run order)."""
    out: list[QualityWarning] = []
    n = len(values)
    if n < stats.MIN_SAMPLES_FOR_CI:
        out.append(QualityWarning("few-samples", label, f"{n} ok runs: fewer than {stats.MIN_SAMPLES_FOR_CI}, "
                                                        "no 95% CI"))
    # Spread and outliers are read from any number of runs: a 15-58% spread under --reps 5 is
    # exactly what a user must hear about.
    cv = stats.cv(values)
    if cv is not None and cv > CV_WARN:
        out.append(QualityWarning("cv", label, f"coefficient of variation {cv:.1%} > {CV_WARN:.0%}"))
    if n < MIN_FOR_OUTLIERS:
        return out
    z = stats.modified_z(values)
    if abs(z[0]) > FIRST_OUTLIER_Z:
        out.append(QualityWarning("first-outlier", label, f"the first run is an outlier (modified z {z[0]:+.1f}, "
                                                   f"|z| > {FIRST_OUTLIER_Z}): a cold start the warm-up did not absorb"))
    others = [i for i in stats.outliers(values, MAD_OUTLIER_Z) if i != 0]
    if others:
        out.append(QualityWarning("outliers", label, f"{len(others)} of {n} runs are outliers by MAD "
                                              f"(modified |z| > {MAD_OUTLIER_Z})"))
    if target_ci is not None and n >= stats.MIN_SAMPLES_FOR_CI:
        est = stats.median_ci(values)
        hw = est.half_width_rel
        if hw is not None and hw > target_ci:
            out.append(QualityWarning("target-not-reached", label,
                               f"CI half-width ±{hw:.1%} did not reach the ±{target_ci:.1%} target in {n} runs"))
    return out


# The measured runs count each memory system call on its tracepoint, and the kernel builds a record
# at every call counted: ~270 ns a call on this project's VM, more than a futex call itself costs
# (~250 ns). Where those calls together cost at least the materiality share of the CPU time, the
# times are partly memsleuth's. A 4-thread program contending on one glibc arena (4-12 million futex
# calls a run), three interleaved pairs under ms-run: 3.6-3.9 s wall with --no-counters, 6.0-7.7 s
# with the counters (user 3.0-3.3 s -> 5.2-5.9 s), and its threads' contention changed with it (perf:
# futex in 47% of its samples alone, 37% of those outside the counting under it).
COUNTING_WARN = cost.MATERIAL_SHARE


def counting_cost(label: str, sc, units) -> QualityWarning | None:
    """The warning that memsleuth's own counting of the system calls is a material part of a scope's
    (findings.view.Scope) CPU time, or None."""
    spent = cost.counting_ns(sc, units)
    cpu = (sc.user_ns or 0.0) + (sc.sys_ns or 0.0)
    if not spent or not cpu or spent < COUNTING_WARN * cpu:
        return None
    calls = sum(n for n in sc.syscalls.values() if n)
    top = max(sc.syscalls, key=lambda k: sc.syscalls[k] or 0)
    return QualityWarning("counting", label,
                          f"memsleuth's counting of the system calls cost about {cost.ms(spent)} ms of kernel time "
                          f"here, {cost.pct(spent / cpu)} of the CPU time (threshold {COUNTING_WARN:.0%}): "
                          f"{calls:,.0f} calls counted ({top} {sc.syscalls[top]:,.0f}) at {units.count_ns:,.0f} ns each, "
                          "as measured on this machine. The measured runs' kernel and CPU times include it, and so "
                          f"does each call's cost in the findings: alone, each call costs about {units.count_ns:,.0f} "
                          "ns less")


# Every cell's shortest wall time within 2% of the others, while the program prints numbers: the
# program probably runs for a fixed time and reports its own figure (larson does), which the wall
# time cannot show. The shortest run of each cell, not its median: load only ever adds time (on a
# loaded machine the medians of fixed-duration runs were 1.5-2.0% apart, and the warning missed
# 3 of 9), while the shortest runs of a fixed-duration program stay at its duration. 2%: under four
# busy loops on 2 cores, process start-up alone moved the shortest runs of a 0.5 s program by >1%.
FIXED_WALL_SPREAD = 0.02


def fixed_wall_time(cells: list[tuple[str, float, list]]) -> list[QualityWarning]:
    """cells: (metric kind, median, ok samples) of every cell with a result."""
    walls = [min((s.wall_ns / 1e9 for s in samples), default=m) for kind, m, samples in cells if kind == "wall_s"]
    if len(walls) < 2 or len(walls) != len(cells) or max(walls) > (1 + FIXED_WALL_SPREAD) * min(walls):
        return []
    prints_numbers = any(any(ch.isdigit() for ch in s.stdout_tail) for _, _, samples in cells for s in samples)
    if not prints_numbers:
        return []
    return [QualityWarning("wall-fixed", "run", f"every cell's shortest wall time is within {FIXED_WALL_SPREAD:.0%} of "
                           f"the others ({min(walls):.4g}-{max(walls):.4g} s) and the program prints numbers: it may run "
                           "for a fixed time and report its own figure; measure that with --metric "
                           "'NAME=REGEX[:higher|lower]'")]


def machine_warnings(machine: MachineInfo) -> list[QualityWarning]:
    out: list[QualityWarning] = []
    cpus = machine.cpus or 1
    for load, when in ((machine.loadavg_1m, "at the start"), (machine.loadavg_1m_end, "at the end")):
        if load is not None and load > LOAD_PER_CPU_WARN * cpus:
            out.append(QualityWarning("load", "machine", f"load average {load:.2f} {when} > {LOAD_PER_CPU_WARN} per CPU "
                                                  f"({LOAD_PER_CPU_WARN * cpus:.1f} on {cpus} CPUs)"))
    gov = machine.governor
    if gov is None:
        out.append(QualityWarning("governor", "machine", "no CPU frequency governor visible (a VM): the host may change "
                                                  "the frequency during the run"))
    elif gov != "performance":
        out.append(QualityWarning("governor", "machine", f"CPU governor '{gov}' scales frequency with load: set "
                                                  "'performance' for stable timings"))
    return out
