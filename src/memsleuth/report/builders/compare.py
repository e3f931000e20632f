"""`memsleuth compare` (and `show` of a compare run): throughput, memory, the allocators' own
cost, latency, the evidence, measurement quality and failures, with their figures."""
from __future__ import annotations

from memsleuth.analysis.summary import (
    STANDOUT_FACTOR,
    STANDOUT_MIN_EVENTS,
    STANDOUT_MIN_RSS_MIB,
    STANDOUT_MIN_SYS_POINTS,
    Group,
    RunAnalysis,
)
from memsleuth.events import HARDWARE as HARDWARE_EVENTS, HARDWARE_SHORT as HW_SHORT, SYSCALL_COLUMNS
from memsleuth.records.stored import StoredRun
from memsleuth.report.content import RatioFigure, Report, Table, ThroughputFigure
from memsleuth.report.sections import failures_table, flame_figures, timeline_figure
from memsleuth.report.wording import (
    compare_answer,
    environment_lines,
    group_label,
    kb_ci,
    leftover_lines,
    machine_lines,
    memsleuth_command,
    metric_text,
    metric_title,
    n_text,
    ns_ci,
    params_text,
    variant_lines,
    verdict_text,
    command_text,
)
from memsleuth.units import fmt_bytes, fmt_count, fmt_si


def build(run: StoredRun, a: RunAnalysis) -> Report:
    """The compare report of a stored run, from its analysis (analysis.analyse_run)."""
    swept = list(run.spec.swept)
    groups = a.groups
    what = f"workload {run.name}" if run.kind == "workload" else f"command: {command_text(run.spec.command or [])}"
    header = [
        f"{what}; {run.spec.rounds or str(run.spec.reps) + ' interleaved rounds'} + "
        f"{run.spec.warmup} warm-up per cell; status {run.status}; {run.created_at}",
        *machine_lines(run),
    ]
    fixed = {k: v for k, v in (run.cells[0].params.items() if run.cells else []) if k not in swept and k != "variant"}
    if fixed:
        header.append("parameters: " + ", ".join(f"{k}={v}" for k, v in fixed.items()))
    header += environment_lines(run.cells) + leftover_lines(run.cells) + variant_lines(run)
    tables = [throughput_table(run, groups, swept), memory_table(groups, swept)]
    tables += [t for t in (heap_table(groups, swept), cost_table(groups, swept),
                           latency_table(groups, swept, a.latency_sampling)) if t]
    tables.append(evidence_table(groups, swept))
    for extra in (failures_table(groups, swept), quality_table(a)):
        if extra:
            tables.append(extra)
    footer = []
    if run.status == "interrupted":
        footer.append("This run was interrupted: the tables show the samples that finished.")
    figures = [throughput_figure(groups, swept, metric_title(run, groups)), ratio_figure(groups, swept)]
    figures += [f for g in groups for c in g.cells if (f := timeline_figure(c.short_label or c.cell.label,
                                                                           [s for _, s in c.ok_samples]))]
    return Report(f"memsleuth compare — run {run.id}", header, tables, footer, a.all_findings, quiet=a.quiet,
                  answer=compare_answer(a.standings), figures=[f for f in figures if f],
                  later_figures=lambda: flame_figures(run.cells),   # compare --where: each cell's sampled stacks
                  command=memsleuth_command(run.argv), run=run, analysis=a)


def throughput_table(run: StoredRun, groups: list[Group], swept: list[str]) -> Table:
    metric_name = metric_title(run, groups)
    target = run.spec.target_ci
    cols = ([", ".join(swept)] if swept else []) + ["allocator", metric_name, "95% CI", "vs fastest (paired)",
                                                    "runs, CI half-width"]
    rows = []
    failed = set()
    for g in groups:
        for c in g.cells:
            value, ci = metric_text(c)
            row = ([params_text(c.cell.params, swept)] if swept else []) + [c.cell.contender, value, ci,
                                                                           verdict_text(c), n_text(c, target)]
            if c.estimate is None:
                failed.add((len(rows), len(row) - 4))
            elif c.not_reached is not None:
                failed.add((len(rows), len(row) - 2))
            rows.append(row)
    per_cpu = any(c.per_cpu_s is not None for g in groups for c in g.cells)
    if per_cpu:
        cols += ["per CPU-second [95% CI]", "vs best per CPU-s (paired)"]
        i = 0
        for g in groups:
            for c in g.cells:
                e = c.per_cpu_s
                if e is None:
                    shown, vs = "-", "-"
                else:
                    shown = f"{fmt_count(e.median)} [{fmt_count(e.low)}, {fmt_count(e.high)}]" if e.low is not None \
                        else fmt_count(e.median)
                    vs = c.per_cpu_verdict.text.replace("slower", "less") if c.per_cpu_verdict else "best"
                rows[i] += [shown, vs]
                i += 1
    notes = []
    if any(g.checksum_mismatch for g in groups):
        notes.append("WARNING: workload checksums differ between allocators or runs of the same parameters: "
                     "the work done was not the same.")
    if run.spec.variants:
        notes += tuning_notes(groups, swept)
    noise = run.spec.noise
    if per_cpu:
        notes.append("per CPU-second: the program's figure divided by the CPU time (user + system) of the same run; "
                     "on a machine where the program does not get all the CPU it asks for, a fixed-duration "
                     "benchmark's figure follows the CPU time it got, and this one does not.")
    notes.append("Median of the runs with a distribution-free 95% CI (order statistics). 'vs fastest' is the "
                 "median of per-round ratios against the group's fastest with its 95% CI, called only when the "
                 f"whole CI lies beyond ±{noise:.0%}.")
    return Table("Throughput", cols, rows, notes, align_right={len(cols) - (6 if per_cpu else 4)}, failed=failed)


def memory_table(groups: list[Group], swept: list[str]) -> Table:
    """Memory beside speed: peak and time-averaged RSS with their CIs, the paired ratio of peak RSS
    to the group's smallest, and the trade-off against the fastest."""
    cols = ([", ".join(swept)] if swept else []) + ["allocator", "peak RSS [95% CI]", "time-averaged RSS [95% CI]",
                                                    "peak RSS vs smallest (paired)", "speed vs memory"]
    rows = []
    for g in groups:
        ok = [c for c in g.cells if c.estimate is not None]
        for c in ok:
            r = c.rss_ratio
            ratio = "-" if r is None else ("smallest" if r.median == 1.0 and r.low in (None, 1.0) and r.high in (None, 1.0)
                                           else f"{r.median:.2f}x" + (f" [{r.low:.2f}, {r.high:.2f}]" if r.low else ""))
            rows.append(([params_text(c.cell.params, swept)] if swept else []) +
                        [c.cell.contender, kb_ci(c.peak_rss), kb_ci(c.mean_rss), ratio, _tradeoff(c, ok)])
    notes = ["Resident memory of the whole process tree: peak per run (ms-run's samples and ru_maxrss), and its "
             "average over the run's timeline; medians over the runs with their distribution-free 95% CIs. "
             "'speed vs memory' sets each cell against its group's fastest (where the paired rounds resolve no "
             "fastest, against the lowest median time)."]
    if any(c.peak_rss is not None and c.mean_rss is None for g in groups for c in g.cells):
        notes.append("time-averaged RSS n/a: a run shorter than two of ms-run's 10 ms timeline points has no average "
                     "(its one point is read at exec); none is shown unless every run of the cell has one.")
    return Table("Memory", cols, rows, notes, align_right={len(cols) - 5 + 1, len(cols) - 5 + 2})


def _tradeoff(c, ok) -> str:
    best = next((x for x in ok if x.is_best), None)
    if best is None or c.peak_rss is None or best.peak_rss is None:
        return "-"
    if c is best:   # "the fastest" only where the paired rounds resolved it
        return "the fastest" if best.best_resolved else "the lowest median time (no winner resolved)"
    speed = c.verdict.text if c.verdict else "not compared"
    mem = c.rss_vs_fastest
    if mem is None:
        return speed
    whose = "the fastest's" if best.best_resolved else f"{best.cell.contender}'s (the lowest median time)"
    return f"{speed}; {mem:.2f}x {whose} peak RSS" + (" (smaller)" if mem < 1 else "")


def tuning_notes(groups: list[Group], swept: list[str]) -> list[str]:
    """With --variant: per group, the fastest allocator+variant with how far the next one is behind
    (paired), and the one with the least peak RSS (analysis.compare_group picks them)."""
    out = []
    for g in groups:
        ok = [c for c in g.cells if c.estimate is not None]
        if len(ok) < 2:
            continue
        best = next((c for c in ok if c.is_best), None)
        where = params_text(g.cells[0].cell.params, swept)
        nxt = g.runner_up
        if best is not None and nxt is not None:
            out.append(f"Tuning, {where}: fastest {best.cell.contender}; the next, {nxt.cell.contender}, "
                       f"{nxt.verdict.text if nxt.verdict else 'not compared'}.")
        if g.least_rss is not None:
            out.append(f"Tuning, {where}: least peak RSS {g.least_rss.cell.contender} ({kb_ci(g.least_rss.peak_rss)}).")
    return out


def cost_table(groups: list[Group], swept: list[str]) -> Table | None:
    """The harness out of the ratios: per cell, region main's ns/op, the harness's (the same loop on a
    no-op pool, in the same process), and the difference, the allocator's own cost per op."""
    cells = [c for g in groups for c in g.cells if c.estimate is not None and c.own_ns is not None]
    if not cells:
        return None
    cols = ([", ".join(swept)] if swept else []) + ["allocator", "ns/op (main)", "harness ns/op", "own ns/op [95% CI]",
                                                    "own cost vs least (paired)"]
    rows = []
    for c in cells:
        r = c.own_ratio
        ratio = "-" if r is None else ("least" if r.median == 1.0 and r.low in (None, 1.0) and r.high in (None, 1.0)
                                       else f"{r.median:.2f}x" + (f" [{r.low:.2f}, {r.high:.2f}]" if r.low else ""))
        rows.append(([params_text(c.cell.params, swept)] if swept else []) +
                    [c.cell.contender, f"{c.main_ns.median:,.1f}" if c.main_ns else "-",
                     f"{c.harness_ns.median:,.1f}" if c.harness_ns else "-", ns_ci(c.own_ns), ratio])
    shares = [c.harness_share for c in cells if c.harness_share is not None]
    notes = ["harness: region 'harness' of the same runs, the workload's loop with the allocator calls replaced by "
             "a no-op pool; own = main - harness per run, median with its 95% CI. Ratios of raw throughput include "
             "the harness and understate the allocators' own difference"
             + (f" (here the harness is {min(shares):.0%}-{max(shares):.0%} of an operation)." if shares else ".")]
    if any(c.own_ns.median <= 0 for c in cells):
        notes.append("An own cost at or below zero: the harness takes as long as the whole loop there, so the "
                     "allocators' own costs are not told apart in that group and no ratio is given.")
    n = len(cols)
    return Table("Cost per operation", cols, rows, notes, align_right={n - 4, n - 3, n - 2})


def heap_table(groups: list[Group], swept: list[str]) -> Table | None:
    """The cells whose explaining run accounted the heap (memory.footprint): the live heap against the
    anonymous resident memory, at the live peak, where the most memory beyond it was, and at exit."""
    rows = []
    for g in groups:
        for c in g.cells:
            f = c.heap
            if f is None:
                continue
            most = (f"{fmt_bytes(f.most_beyond_live_bytes)} (live {fmt_bytes(f.live_then_bytes)}, "
                    f"{f.most_beyond_live_at_s:.1f} s)" if f.most_beyond_live_bytes is not None else "n/a")
            arenas = f.other_arenas_at_peak
            anon = fmt_bytes(f.anon_at_peak_bytes) + (
                "" if f.anon_read_near_peak else f" (at live {fmt_bytes(f.anon_read_at_live_bytes)})")
            rows.append(([params_text(c.cell.params, swept)] if swept else []) +
                        [c.cell.contender, fmt_bytes(f.live_at_peak_bytes), anon, most,
                         fmt_bytes(f.live_at_exit_bytes), fmt_bytes(f.anon_at_exit_bytes),
                         str(arenas) if arenas is not None else "n/a"])
    if not rows:
        return None
    cols = ([", ".join(swept)] if swept else []) + [
        "allocator", "live heap at its peak", "anonymous then", "most anonymous beyond live", "live heap at exit",
        "anonymous at exit", "glibc arenas besides main"]
    n = len(cols)
    return Table("Heap: live bytes against resident memory", cols, rows,
                 ["From the heap accounting of each cell's explaining run (one run, not the measured ones), for its "
                  "main process (the largest live peak): live heap = usable bytes of the live blocks; anonymous = "
                  "anonymous resident memory (RssAnon), read when the live heap was within 10% of its peak (a peak "
                  "briefer than the spacing between readings is missed: the cell then says the live heap it was "
                  "read at) and at exit. Most anonymous beyond live: the largest anonymous - live of any 10 ms tick, "
                  "with the live heap and the time then (n/a when the run had several processes: the timeline is "
                  "the whole tree's); after frees it is the allocator's overhead, the freed memory it keeps "
                  "(fragmentation) and the program's other anonymous mappings."],
                 align_right=set(range(n - 6, n)))


def latency_table(groups: list[Group], swept: list[str], info: tuple[int, float] | None) -> Table | None:
    """Tail latency of the sampled allocator calls, per cell and operation."""
    cells = [c for g in groups for c in g.cells if c.latency]
    if not cells:
        return None
    cols = ([", ".join(swept)] if swept else []) + ["allocator", "call", "timed calls", "p50 ns", "p99 ns",
                                                    "p99.9 ns", "max ns"]
    rows = []
    for c in cells:
        for op, lat in c.latency.items():
            rows.append(([params_text(c.cell.params, swept)] if swept else []) +
                        [c.cell.contender, op, fmt_count(lat.n), f"{lat.p50:,.0f}", f"{lat.p99:,.0f}",
                         f"{lat.p999:,.0f}", f"{lat.max:,.0f}"])
    shares = [c.sampling_share for c in cells if c.sampling_share is not None]
    notes = ["Calls timed at random (" + (f"1 in {info[0]} on average" if info else "sampled") + ") in region main of "
             "every measured run, merged; percentiles are the upper edge of a log-linear bucket (at most 12.5% above "
             "the true value), the max is exact."
             + (f" Each includes about one clock read ({info[1]:.0f} ns here)." if info else "")
             + (f" Estimated sampling cost: {min(shares):.1%}-{max(shares):.1%} of region main "
                "(about 4 clock reads per timed call; bench/latency_cost.py measures it directly)." if shares else "")]
    n = len(cols)
    return Table("Latency", cols, rows, notes, align_right=set(range(n - 5, n)))


def evidence_table(groups: list[Group], swept: list[str]) -> Table:
    cells = [c for g in groups for c in g.cells if c.estimate is not None]
    have_hw = any(v is not None for c in cells for v in c.evidence.hardware.values())
    cols = ([", ".join(swept)] if swept else []) + ["allocator", "user s", "sys s", "sys %", "minor faults",
                                                    "major faults", "peak RSS", *SYSCALL_COLUMNS]
    cols += [HW_SHORT[h] for h in HARDWARE_EVENTS] if have_hw else ["hw counters"]
    rows = []
    for c in cells:
        e = c.evidence
        row = ([params_text(c.cell.params, swept)] if swept else []) + [c.cell.contender]
        row += [f"{e.user_s:.3f}" if e.user_s is not None else "n/a",
                f"{e.sys_s:.3f}" if e.sys_s is not None else "n/a",
                f"{100 * e.sys_share:.1f}%" if e.sys_share is not None else "n/a",
                fmt_count(e.minflt), fmt_count(e.majflt),
                fmt_bytes(e.maxrss_kb * 1024 if e.maxrss_kb is not None else None)]
        row += [fmt_count(e.syscalls[s]) if s in e.syscalls else "n/a" for s in SYSCALL_COLUMNS]
        if have_hw:
            row += [fmt_si(e.hardware[h]) if e.hardware[h] is not None else "n/a" for h in HARDWARE_EVENTS]
        else:
            row.append("n/a (no PMU)" if _no_pmu(e.unsupported) else "n/a")
        rows.append(row)
    scopes = {c.evidence.scope for c in cells if c.evidence.scope != "none"}
    where = ' / '.join(sorted(scopes)) or "no successful run"
    notes = [f"Medians per run. Time, faults and syscalls are from {where}; "
             "peak RSS is the whole process's."]
    if any(s.syscalls_from for c in cells for _, s in c.ok_samples):
        notes.append("The syscalls are counted in each cell's warm-up, which is not timed: the timed rounds count "
                     "none, since counting each call slows the program (bench/msrun_overhead.py).")
    offset = 1 if swept else 0   # the allocator column
    marked = {(r, cols.index(name, offset + 1)) for r, c in enumerate(cells) for name in c.standout if name in cols}
    if marked:
        notes.append(f"Highlighted: at least {STANDOUT_FACTOR:g}x the smallest value among the allocators of the same "
                     f"parameters (and {STANDOUT_MIN_EVENTS} events, {STANDOUT_MIN_SYS_POINTS} points of sys % or "
                     f"{STANDOUT_MIN_RSS_MIB} MiB of RSS more): where the cells differ.")
    user_only = sorted({e for c in cells for _, s in c.ok_samples for e in s.user_only})
    if user_only:
        notes.append(f"Counted in user space only (perf_event_paranoid > 1 and not root): {', '.join(user_only)}; "
                     "faults taken inside system calls and kernel time are not in them.")
    unsupported = next((c.evidence.unsupported for c in cells if c.evidence.unsupported), {})
    if unsupported:
        reasons: dict[str, list[str]] = {}
        for ev, why in unsupported.items():
            reasons.setdefault(why, []).append(ev)
        for why, evs in reasons.items():
            notes.append(f"Not measured: {', '.join(evs)} ({why}).")
    return Table("Evidence", cols, rows, notes, align_right=set(range(offset + 1, len(cols) - 1)), differs=marked)


def _no_pmu(unsupported: dict[str, str]) -> bool:
    return any(h in unsupported and "PMU" in unsupported[h] for h in HARDWARE_EVENTS)


def quality_table(a: RunAnalysis) -> Table | None:
    rows = [["machine", w.text] for w in a.machine_warnings]
    rows += [[w.subject, w.text] for g in a.groups for c in g.cells for w in c.warnings]
    if not rows:
        return None
    return Table("Measurement quality", ["where", "warning"], rows,
                 ["Thresholds and their reasons: docs/statistics.md."])


def throughput_figure(groups: list[Group], swept: list[str], title: str = "") -> ThroughputFigure | None:
    cells = [c for g in groups for c in g.cells]
    if not any(c.estimate for c in cells):
        return None
    hib = next(c.higher_is_better for c in cells if c.estimate)
    labels = [group_label(g, swept) for g in groups]
    series: dict[str, list] = {}
    for gi, g in enumerate(groups):
        for c in g.cells:
            row = series.setdefault(c.cell.contender, [None] * len(groups))
            e = c.estimate
            if e is not None:
                row[gi] = (e.median, e.low if e.low is not None else e.median, e.high if e.high is not None else e.median)
    return ThroughputFigure(title or ("throughput (ops/s)" if hib else "wall time (s)"), hib, labels, series)


def ratio_figure(groups: list[Group], swept: list[str]) -> RatioFigure | None:
    allocs = list(dict.fromkeys(c.cell.contender for g in groups for c in g.cells))
    if len(allocs) < 2:
        return None
    labels = [group_label(g, swept) for g in groups]
    ratio = [[None] * len(groups) for _ in allocs]
    resolved = [[False] * len(groups) for _ in allocs]
    for gi, g in enumerate(groups):
        for c in g.cells:
            ai = allocs.index(c.cell.contender)
            if c.ratio is not None:
                ratio[ai][gi] = c.ratio.median
                resolved[ai][gi] = c.best_resolved or (c.verdict is not None and c.verdict.kind != "unresolved")
    return RatioFigure(labels, allocs, ratio, resolved)
