"""The report as data: titled tables of already-formatted strings, plus notes.

Terminal and Markdown render the same model, so the two formats never disagree on a number.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import shlex

from memsleuth.analysis import CellSummary, Group, RunAnalysis, analyse_check, analyse_run, failure_label
from memsleuth.events import HARDWARE as HARDWARE_EVENTS, HARDWARE_SHORT as HW_SHORT, SYSCALL_COLUMNS
from memsleuth.stats import MIN_SAMPLES_FOR_CI
from memsleuth.records import StoredCell, StoredRun
from memsleuth.errors import UsageError
from memsleuth.model import cell_label
from memsleuth.units import fmt_bytes, fmt_count, fmt_seconds, fmt_si, fmt_size_arg


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)
    align_right: set[int] = field(default_factory=set)
    failed: set[tuple[int, int]] = field(default_factory=set)   # (row, column) cells that show a failure
    differs: set[tuple[int, int]] = field(default_factory=set)  # (row, column) cells far from their group's others


@dataclass
class ThroughputFigure:
    """The headline metric per allocator across the swept parameter, with 95% CIs."""
    metric: str                                    # "throughput (ops/s)" or "wall time (s)"
    higher_is_better: bool
    groups: list[str]                              # the swept parameters' values, one per group
    series: dict[str, list[tuple[float, float, float] | None]]   # allocator -> (median, low, high) per group


@dataclass
class RatioFigure:
    """Paired ratio to each group's fastest: allocator x group; None where it could not be read."""
    groups: list[str]
    allocators: list[str]
    ratio: list[list[float | None]]                # [allocator][group]
    resolved: list[list[bool]]                     # whether the verdict called it (CI beyond the noise)
    caption: str | None = None                     # what the ratios are, when not paired per-round ratios


@dataclass
class TimelineFigure:
    """RSS over time for one cell (every run, the median one marked), and the median run's rates."""
    label: str
    runs: list[tuple[list[float], list[float]]]    # (seconds, RSS MiB) per run
    median: int                                    # index of the median run in runs
    rates: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)  # name -> (s, per second)


@dataclass
class ChangeFigure:
    """`diff`: each cell's change B/A in time with its CI, and the threshold."""
    cells: list[str]
    change: list[tuple[float, float | None, float | None] | None]   # (median, low, high) of B/A time
    regression: list[bool]
    threshold: float


@dataclass
class CompositionFigure:
    """check: resident memory over time in the explaining run, stacked: live heap, the anonymous
    memory beyond it, file-backed (MiB per second since start)."""
    label: str
    seconds: list[float]
    live: list[float]
    beyond: list[float]
    file: list[float]


@dataclass
class ResultFigure:
    """A case's result: per label, a median with its 95% CI, in one unit (cases.base.CaseFigure)."""
    title: str
    unit: str
    rows: list[tuple[str, float, float | None, float | None]]
    higher_is_better: bool = True


@dataclass
class TrendFigure:
    cell: str
    metric: str
    unit: str
    points: list[tuple[int, float, float | None, float | None]]   # (run id, median, low, high)
    steps: list[int]                                              # the first run after each step


@dataclass
class Report:
    title: str
    header: list[str]
    tables: list[Table]
    footer: list[str] = field(default_factory=list)
    findings: list = field(default_factory=list)   # memsleuth.findings.Finding, rendered as blocks
    quiet: str | None = None                       # no mechanism finding: the one line that says what was found
    answer: list[str] = field(default_factory=list)   # the answer in one to three lines, first after the title
    footer_alert: bool = False                     # the footer reports a problem (a regression): red, not neutral
    question: str | None = None                    # a case study's question, shown before the tables
    statements: list[str] = field(default_factory=list)   # a case's "what the evidence shows"
    figures: list = field(default_factory=list)    # ThroughputFigure, RatioFigure, TimelineFigure, ChangeFigure
    command: str = ""                              # the memsleuth command line, shell-quoted
    run: StoredRun | None = None                   # the stored run it shows (exports read it)


def _params_text(params: dict, swept: list[str]) -> str:
    return ", ".join(f"{k}={params[k]}" for k in swept if k in params) or "-"


def _metric_text(c: CellSummary) -> tuple[str, str]:
    e = c.estimate
    if e is None:
        return failure_label(c.failures[0]) if c.failures else "NO DATA", ""
    unit = {"ops_per_s": "ops/s", "wall_s": "s"}.get(c.metric, "")
    fmt = fmt_si if c.metric != "wall_s" else (lambda x: f"{x:.4g}")
    ci = f"[{fmt(e.low)}, {fmt(e.high)}]" if e.low is not None else f"n/a (n={e.n} < {MIN_SAMPLES_FOR_CI})"
    return f"{fmt(e.median)} {unit}", ci


def _verdict_text(c: CellSummary) -> str:
    """Against the group's fastest, from per-round ratios; called only beyond the noise threshold."""
    if c.estimate is None:
        return "-"
    if c.is_best:
        return "fastest" if c.best_resolved else "no winner resolved"
    return c.verdict.text if c.verdict else "-"


def _n_text(c: CellSummary, target: float | None) -> str:
    n = f"{len(c.ok_samples)}" + (f" (+{len(c.failures)} failed)" if c.failures and c.ok_samples else "")
    hw = c.estimate.half_width_rel if c.estimate else None
    if hw is None:
        return n
    mark = "" if target is None else (" ok" if hw <= target else " (target not reached)")
    return f"{n}, ±{hw:.1%}{mark}"


def metric_title(run: StoredRun, groups: list[Group]) -> str:
    kinds = {c.metric for g in groups for c in g.cells if c.estimate is not None}
    if "output" in kinds:
        m = run.spec.metric or {}
        way = "higher" if m.get("higher", True) else "lower"
        return f"{m.get('name', 'metric')} (printed by the program, {way} is better)"
    return "throughput (region main)" if "ops_per_s" in kinds else "wall time (whole process)"


def _kb_ci(e) -> str:
    if e is None:
        return "n/a"
    if e.low is None:
        return f"{fmt_bytes(e.median * 1024)} (n={e.n} < {MIN_SAMPLES_FOR_CI})"
    return f"{fmt_bytes(e.median * 1024)} [{fmt_bytes(e.low * 1024)}, {fmt_bytes(e.high * 1024)}]"


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
            rows.append(([_params_text(c.cell.params, swept)] if swept else []) +
                        [c.cell.contender, _kb_ci(c.peak_rss), _kb_ci(c.mean_rss), ratio, _tradeoff(c, ok)])
    notes = ["Resident memory of the whole process tree: peak per run (ms-run's samples and ru_maxrss), and its "
             "average over the run's timeline; medians over the runs with their distribution-free 95% CIs. "
             "'speed vs memory' sets each cell against its group's fastest."]
    return Table("Memory", cols, rows, notes, align_right={len(cols) - 5 + 1, len(cols) - 5 + 2})


def _ns_ci(e) -> str:
    if e is None:
        return "-"
    text = f"{e.median:,.1f}"
    return text + (f" [{e.low:,.1f}, {e.high:,.1f}]" if e.low is not None else f" (n={e.n} < {MIN_SAMPLES_FOR_CI})")


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
        rows.append(([_params_text(c.cell.params, swept)] if swept else []) +
                    [c.cell.contender, f"{c.main_ns.median:,.1f}" if c.main_ns else "-",
                     f"{c.harness_ns.median:,.1f}" if c.harness_ns else "-", _ns_ci(c.own_ns), ratio])
    shares = [h.harness_ns.median / h.main_ns.median for h in cells if h.harness_ns and h.main_ns and h.main_ns.median]
    notes = ["harness: region 'harness' of the same runs, the workload's loop with the allocator calls replaced by "
             "a no-op pool; own = main - harness per run, median with its 95% CI. Ratios of raw throughput include "
             "the harness and understate the allocators' own difference"
             + (f" (here the harness is {min(shares):.0%}-{max(shares):.0%} of an operation)." if shares else ".")]
    n = len(cols)
    return Table("Cost per operation", cols, rows, notes, align_right={n - 4, n - 3, n - 2})


def fragmentation_table(groups: list[Group], swept: list[str]) -> Table | None:
    """Workloads that record live bytes and RSS per phase (fragmentation): RSS / live bytes."""
    rows = []
    for g in groups:
        for c in g.cells:
            f = c.fragmentation
            if f is None:
                continue
            rows.append(([_params_text(c.cell.params, swept)] if swept else []) +
                        [c.cell.contender, f"{f['rss_over_live_end']:.2f}", f"{f['rss_over_live_worst']:.2f}",
                         fmt_bytes(f["live_bytes_end"]) if f["live_bytes_end"] is not None else "-",
                         fmt_bytes(f["rss_bytes_end"]) if f["rss_bytes_end"] is not None else "-"])
    if not rows:
        return None
    cols = ([", ".join(swept)] if swept else []) + ["allocator", "RSS / live, end", "RSS / live, worst phase",
                                                    "live at end", "RSS at end"]
    n = len(cols)
    return Table("Fragmentation", cols, rows,
                 ["Measured by the workload after each phase (its frees done): the process's RSS over the bytes its "
                  "blocks hold. 1.0 would be no overhead at all; the process's own few MiB count too. Medians over "
                  "the runs."], align_right=set(range(n - 4, n)))


def latency_table(groups: list[Group], swept: list[str]) -> Table | None:
    """Tail latency of the sampled allocator calls, per cell and operation."""
    cells = [c for g in groups for c in g.cells if c.latency]
    if not cells:
        return None
    cols = ([", ".join(swept)] if swept else []) + ["allocator", "call", "timed calls", "p50 ns", "p99 ns",
                                                    "p99.9 ns", "max ns"]
    rows = []
    for c in cells:
        for op, lat in c.latency.items():
            rows.append(([_params_text(c.cell.params, swept)] if swept else []) +
                        [c.cell.contender, op, fmt_count(lat.n), f"{lat.p50:,.0f}", f"{lat.p99:,.0f}",
                         f"{lat.p999:,.0f}", f"{lat.max:,.0f}"])
    from memsleuth.latency import sampling_info
    info = sampling_info([s.result for c in cells for _, s in c.ok_samples if s.result])
    shares = [c.sampling_share for c in cells if c.sampling_share is not None]
    notes = ["Calls timed at random (" + (f"1 in {info[0]} on average" if info else "sampled") + ") in region main of "
             "every measured run, merged; percentiles are the upper edge of a log-linear bucket (at most 12.5% above "
             "the true value), the max is exact."
             + (f" Each includes about one clock read ({info[1]:.0f} ns here)." if info else "")
             + (f" Estimated sampling cost: {min(shares):.1%}-{max(shares):.1%} of region main "
                "(about 4 clock reads per timed call; bench/latency_cost.py measures it directly)." if shares else "")]
    n = len(cols)
    return Table("Latency", cols, rows, notes, align_right=set(range(n - 5, n)))


def _tradeoff(c, ok) -> str:
    best = next((x for x in ok if x.is_best), None)
    if best is None or c.peak_rss is None or best.peak_rss is None:
        return "-"
    if c is best:
        return "the fastest"
    mem = c.peak_rss.median / best.peak_rss.median if best.peak_rss.median else None
    speed = c.verdict.text if c.verdict else "not compared"
    if mem is None:
        return speed
    return f"{speed}; {mem:.2f}x the fastest's peak RSS" + (" (smaller)" if mem < 1 else "")


def tuning_notes(groups: list[Group], swept: list[str]) -> list[str]:
    """With --variant: per group, the fastest allocator+variant with how far the next one is behind
    (paired), and the one with the least peak RSS."""
    out = []
    for g in groups:
        ok = [c for c in g.cells if c.estimate is not None]
        if len(ok) < 2:
            continue
        best = next((c for c in ok if c.is_best), None)
        others = sorted((c for c in ok if c is not best and c.ratio is not None), key=lambda c: c.ratio.median)
        where = _params_text(g.cells[0].cell.params, swept)
        if best is not None and others:
            nxt = others[0]
            out.append(f"Tuning, {where}: fastest {best.cell.contender}; the next, {nxt.cell.contender}, "
                       f"{nxt.verdict.text if nxt.verdict else 'not compared'}.")
        rss = [c for c in ok if c.peak_rss is not None]
        if rss:
            small = min(rss, key=lambda c: c.peak_rss.median)
            out.append(f"Tuning, {where}: least peak RSS {small.cell.contender} ({_kb_ci(small.peak_rss)}).")
    return out


def throughput_table(run: StoredRun, groups: list[Group], swept: list[str]) -> Table:
    metric_name = metric_title(run, groups)
    target = run.spec.target_ci
    cols = ([", ".join(swept)] if swept else []) + ["allocator", metric_name, "95% CI", "vs fastest (paired)",
                                                    "runs, CI half-width"]
    rows = []
    failed = set()
    for g in groups:
        for c in g.cells:
            value, ci = _metric_text(c)
            row = ([_params_text(c.cell.params, swept)] if swept else []) + [c.cell.contender, value, ci,
                                                                           _verdict_text(c), _n_text(c, target)]
            if c.estimate is None:
                failed.add((len(rows), len(row) - 4))
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


def evidence_table(groups: list[Group], swept: list[str]) -> Table:
    cells = [c for g in groups for c in g.cells if c.estimate is not None]
    have_hw = any(v is not None for c in cells for v in c.evidence.hardware.values())
    cols = ([", ".join(swept)] if swept else []) + ["allocator", "user s", "sys s", "sys %", "minor faults",
                                                    "major faults", "peak RSS", *SYSCALL_COLUMNS]
    cols += [HW_SHORT[h] for h in HARDWARE_EVENTS] if have_hw else ["hw counters"]
    rows = []
    differs = _differs(groups, swept)
    for c in cells:
        e = c.evidence
        row = ([_params_text(c.cell.params, swept)] if swept else []) + [c.cell.contender]
        row += [f"{e.user_s:.3f}" if e.user_s is not None else "n/a",
                f"{e.sys_s:.3f}" if e.sys_s is not None else "n/a",
                f"{100 * e.sys_share:.1f}%" if e.sys_share is not None else "n/a",
                fmt_count(e.minflt), fmt_count(e.majflt),
                fmt_bytes(e.maxrss_kb * 1024 if e.maxrss_kb is not None else None)]
        row += [fmt_count(e.syscalls.get(s)) if s in e.syscalls else "n/a" for s in SYSCALL_COLUMNS]
        if have_hw:
            row += [fmt_si(e.hardware.get(h)) if e.hardware.get(h) is not None else "n/a" for h in HARDWARE_EVENTS]
        else:
            row.append("n/a (no PMU)" if _no_pmu(e.unsupported) else "n/a")
        rows.append(row)
    scopes = {c.evidence.scope for c in cells if c.evidence.scope != "none"}
    where = ' / '.join(sorted(scopes)) or "no successful run"
    notes = [f"Medians per run. Time, faults and syscalls are from {where}; "
             "peak RSS is the whole process's."]
    offset = 1 if swept else 0   # the allocator column; _differs counts the evidence columns after it from 1
    marked = {(r, offset + k) for r, c in enumerate(cells) for k in differs.get(id(c), ())}
    if marked:
        notes.append(f"Highlighted: at least {DIFFERS_FACTOR:g}x the smallest value among the allocators of the same "
                     f"parameters (and {DIFFERS_MIN_EVENTS} events, {DIFFERS_MIN_SYS_POINTS} points of sys % or "
                     f"{DIFFERS_MIN_RSS_MIB} MiB of RSS more): where the cells differ.")
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


# The evidence table highlights a value at least this many times its group's smallest, and by at
# least this much in absolute terms (so 3 brk calls against 1 is not a difference worth the eye).
DIFFERS_FACTOR = 2.0
DIFFERS_MIN_EVENTS = 100
DIFFERS_MIN_SYS_POINTS = 10
DIFFERS_MIN_RSS_MIB = 16


def _differs(groups: list[Group], swept: list[str]) -> dict[int, set[int]]:
    """Per cell (by id), the evidence columns (counted after the allocator column, from 1) whose
    value stands out in its group."""
    def values(c):
        e = c.evidence
        v = {3: (100 * e.sys_share if e.sys_share is not None else None, DIFFERS_MIN_SYS_POINTS),
             4: (e.minflt, DIFFERS_MIN_EVENTS), 5: (e.majflt, DIFFERS_MIN_EVENTS),
             6: ((e.maxrss_kb or 0) / 1024 if e.maxrss_kb is not None else None, DIFFERS_MIN_RSS_MIB)}
        for k, s in enumerate(SYSCALL_COLUMNS):
            v[7 + k] = (e.syscalls.get(s), DIFFERS_MIN_EVENTS)
        return v
    out: dict[int, set[int]] = {}
    for g in groups:
        ok = [c for c in g.cells if c.estimate is not None]
        if len(ok) < 2:
            continue
        table = {id(c): values(c) for c in ok}
        for col in table[id(ok[0])]:
            vals = [(cid, table[cid][col][0]) for cid in table if table[cid][col][0] is not None]
            if len(vals) < 2:
                continue
            low = min(v for _, v in vals)
            floor = table[id(ok[0])][col][1]
            for cid, v in vals:
                if v >= DIFFERS_FACTOR * max(low, 1e-9) and v - low >= floor:
                    out.setdefault(cid, set()).add(col)
    return out


def _no_pmu(unsupported: dict[str, str]) -> bool:
    return any(h in unsupported and "PMU" in unsupported[h] for h in HARDWARE_EVENTS)


def quality_table(a: RunAnalysis) -> Table | None:
    rows = [["machine", w.text] for w in a.machine_warnings]
    rows += [[w.subject, w.text] for g in a.groups for c in g.cells for w in c.warnings]
    if not rows:
        return None
    return Table("Measurement quality", ["where", "warning"], rows,
                 ["Thresholds and their reasons: docs/statistics.md."])


def failures_table(groups: list[Group], swept: list[str]) -> Table | None:
    rows = []
    status_col = 2 if swept else 1
    for g in groups:
        for c in g.cells:
            seen = set()
            for s in c.failures:
                key = (s.status, s.detail)
                if key in seen:
                    continue
                seen.add(key)
                count = sum(1 for f in c.failures if (f.status, f.detail) == key)
                tail = " | ".join(s.stderr_tail.strip().splitlines()[-3:]) or "(empty)"
                rows.append(([_params_text(c.cell.params, swept)] if swept else []) +
                            [c.cell.contender, failure_label(s), f"{s.detail or ''} (x{count})", tail[-300:]])
    if not rows:
        return None
    cols = ([", ".join(swept)] if swept else []) + ["allocator", "status", "detail", "stderr tail"]
    return Table("Failures", cols, rows, failed={(r, status_col) for r in range(len(rows))})


def build_for(run: StoredRun) -> Report:
    """The report of a stored run, by its kind."""
    return {"check": build_check, "case": build_case, "fleet-task": build_fleet_task}.get(run.kind, build)(run)


def build_fleet_task(run: StoredRun) -> Report:
    """A fleet task Slurm did not complete (`fleet collect` records it): its state and log tail."""
    f = run.spec.facts
    header = [f"Slurm task {f.get('slurm_job', '?')} for target {run.name}: state {f.get('slurm_state', '?')}, "
              f"exit code {f.get('exit_code') or '?'}, partition {f.get('partition') or '?'}, node {f.get('node') or '?'}",
              f"its command: {command_text(run.argv)}"]
    tail = [line for line in str(f.get("log_tail", "")).splitlines()]
    return Report(f"memsleuth fleet task — run {run.id} ({run.status})", header,
                  [Table("Log tail", ["line"], [[line] for line in tail] or [["(empty)"]])],
                  command=memsleuth_command(run.argv), run=run)


def command_text(argv) -> str:
    """A command as it can be pasted into a shell."""
    return shlex.join(str(a) for a in argv)


def memsleuth_command(argv) -> str:
    """The memsleuth command line as it can be pasted (argv[0] may be a path or __main__.py)."""
    return command_text(["memsleuth", *list(argv)[1:]]) if argv else ""


def variant_lines(run: StoredRun) -> list[str]:
    """The --variant settings, and the allocators each did not apply to."""
    out = []
    for v in run.spec.variants or []:
        env = " ".join(shlex.quote(f"{k}={val}") for k, val in sorted(v.get("env", {}).items()))
        skipped = v.get("skipped") or []
        out.append(f"variant {v.get('name')}: {env}" + (f"; does not apply to {', '.join(skipped)}: skipped"
                                                        if skipped else ""))
    return out


def environment_lines(cells: list[StoredCell]) -> list[str]:
    """The --env settings the measured processes ran with (per cell where they differ)."""
    # Variants say their own settings (variant_lines): here the settings every cell started from.
    cells = [c for c in cells if c.params.get("variant") in (None, "default")]
    envs = {tuple(sorted(c.env.items())) for c in cells}
    if not any(envs):
        return []
    if len(envs) == 1:
        return ["environment: " + " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(cells[0].env.items()))]
    return [f"environment of {c.label}: " + (" ".join(shlex.quote(f"{k}={v}") for k, v in sorted(c.env.items()))
                                             or "(none set)") for c in cells]


def leftover_lines(cells: list[StoredCell]) -> list[str]:
    """Processes a command left running, which ms-run had to kill when it ended."""
    seen: dict[str, int] = {}
    runs = 0
    for c in cells:
        for _, _, s in c.samples:
            if s.leftover_processes:
                runs += 1
                for p in s.leftover_processes:
                    seen[str(p.get("comm"))] = seen.get(str(p.get("comm")), 0) + 1
    if not seen:
        return []
    names = ", ".join(f"{n} (x{k})" for n, k in sorted(seen.items()))
    return [f"killed after the command ended, in {runs} run(s): processes it left running: {names}"]


def _machine_lines(run: StoredRun) -> list[str]:
    m = run.machine
    load = f"{m.loadavg_1m:.2f}" if m.loadavg_1m is not None else "n/a"
    return [f"machine: {m.cpu_model} x{m.cpus}, kernel {m.kernel}, glibc {m.glibc}, THP {m.thp}, load {load}",
            "allocators: " + "; ".join(f"{a.name} {a.version}" for a in m.allocators)]


def build(run: StoredRun) -> Report:
    swept = list(run.spec.swept)
    a = analyse_run(run)
    groups = a.groups
    what = f"workload {run.name}" if run.kind == "workload" else f"command: {command_text(run.spec.command or [])}"
    header = [
        f"{what}; {run.spec.rounds or str(run.spec.reps) + ' interleaved rounds'} + "
        f"{run.spec.warmup} warm-up per cell; status {run.status}; {run.created_at}",
        *_machine_lines(run),
    ]
    fixed = {k: v for k, v in (run.cells[0].params.items() if run.cells else []) if k not in swept and k != "variant"}
    if fixed:
        header.append("parameters: " + ", ".join(f"{k}={v}" for k, v in fixed.items()))
    header += environment_lines(run.cells) + leftover_lines(run.cells) + variant_lines(run)
    tables = [throughput_table(run, groups, swept), memory_table(groups, swept)]
    tables += [t for t in (fragmentation_table(groups, swept), cost_table(groups, swept),
                           latency_table(groups, swept)) if t]
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
                  answer=a.answer,
                  figures=[f for f in figures if f], command=memsleuth_command(run.argv), run=run)


def build_diff(a: StoredRun, b: StoredRun, changes, threshold: float, argv: list[str] | None = None) -> Report:
    """`memsleuth diff A B`: one row per matched cell, made to be pasted into a pull request."""
    def value(c) -> str:
        if c is None:
            return "-"
        text, ci = _metric_text(c)
        return text if c.estimate is None else f"{text} {ci}"

    from memsleuth.regression import reference_change
    ref = reference_change(a, b)
    rows = []
    for ch in changes:
        s, n = ch.slowdown, ch.normalised
        rows.append([ch.key, value(ch.before), value(ch.after),
                     f"{(s.median - 1) * 100:+.1f}% time" if s else "-",
                     (f"{(n.median - 1) * 100:+.1f}% time" + (f" [{(n.low - 1) * 100:+.1f}, {(n.high - 1) * 100:+.1f}]"
                                                              if n.low is not None else "")) if n else "-",
                     ("REGRESSION: " if ch.time_regression else "") + ch.verdict.text])
    regressions = sum(ch.regression for ch in changes)
    header = [f"A: run {a.id} ({a.created_at}, {a.name}, {a.machine.hostname})",
              f"B: run {b.id} ({b.created_at}, {b.name}, {b.machine.hostname})",
              f"threshold: a change is called only when its whole 95% CI lies beyond ±{threshold:.0%}"]
    if ref is not None:
        way = "slower" if ref.median >= 1 else "faster"
        header.append(f"reference cell (the same small glibc loop, once per round in both runs): B ran it "
                      f"{abs(ref.median - 1) * 100:.1f}% {way} than A; the same code on the same allocator, so that "
                      "change is the machine's. The verdicts read the normalised change, each round divided by its "
                      "reference")
    else:
        header.append("A and B ran at different times, and "
                      + ("neither run" if a.reference is None and b.reference is None else "only one run")
                      + " has the reference cell, so a shift of the whole machine between them is not cancelled and "
                      "reads as a change: choose a threshold above your machine's run-to-run shift "
                      "(docs/statistics.md)")
    if a.machine.cpu_model != b.machine.cpu_model or a.machine.kernel != b.machine.kernel:
        header.append("WARNING: the runs were made on different machines or kernels")
    header += setup_differences(a, b)
    table = Table("Changes, B against A", ["cell", "A", "B", "raw change", "normalised change [95% CI]", "verdict"],
                  rows, ["Change = B's time per op (or per run) / A's, median ratio with a seeded bootstrap 95% CI "
                         "(separate runs cannot be paired by round). Normalised: each round's time divided by the "
                         "same round's reference time first."], align_right={3, 4})
    tables = [table]
    counts = count_table(changes)
    if counts is not None:
        tables.append(counts)
    footer = [f"{regressions} cell(s) with a regression resolved beyond the thresholds." if regressions else
              "No regression resolved beyond the thresholds."]
    fig = ChangeFigure([ch.key for ch in changes],
                       [((e := ch.normalised or ch.slowdown).median, e.low, e.high) if (ch.normalised or ch.slowdown)
                        else None for ch in changes], [ch.time_regression for ch in changes], threshold)
    return Report(f"memsleuth diff — run {a.id} vs run {b.id}", header, tables, footer, figures=[fig],
                  command=memsleuth_command(argv or []), run=b, footer_alert=bool(regressions))


def count_table(changes) -> Table | None:
    """The count checks of a diff that are not a plain pass (a regression, an improvement, or a
    change the runs' spread leaves unresolved); None when every count passed."""
    from memsleuth import gate as gating
    rows, failed, passed = [], set(), 0
    for ch in changes:
        for c in ch.counts:
            if c.verdict == gating.PASS:
                passed += 1
                continue
            if c.gates and c.verdict == gating.REGRESSION:
                failed.add((len(rows), 2))
            rows.append([ch.key, c.metric, c.verdict.upper() if c.verdict == gating.REGRESSION else c.verdict
                         + ("" if c.gates else " (shown, not gated)"), c.text])
    if not rows:
        return None
    return Table("Counts, B against A (page faults, memory syscalls, resident memory)", ["cell", "count", "verdict", "why"],
                 rows, [f"{passed} other count check(s) passed. A count change is called only beyond its threshold and "
                        "when every run of B lies beyond every run of A (docs/ci.md)."], failed=failed)


def build_case(run: StoredRun) -> Report:
    """`memsleuth case NAME`: the question, the case's tables, what the evidence shows, and failures."""
    from memsleuth import cases
    from memsleuth.analysis import analyse
    case = cases.get(run.name)
    result = case.analyse(run)
    params = run.spec.case_params
    header = [f"case {case.name} (seed {case.seed}); {run.spec.rounds} + {run.spec.warmup} "
              f"warm-up per cell; status {run.status}; {run.created_at}", *_machine_lines(run)]
    if params:
        header.append("parameters: " + ", ".join(f"{k}={_param_text(case, k, v)}" for k, v in params.items()))
    tables = [Table(t.title, t.columns, t.rows, t.notes,
                    align_right={i for i, c in enumerate(t.columns) if i and t.rows and
                                 all(_numeric(r[i]) for r in t.rows)})
              for t in result.tables]
    header += leftover_lines(run.cells)
    swept = list(run.spec.swept)
    failed = failures_table(analyse(run), swept)
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
                  command=memsleuth_command(run.argv), run=run)


def _param_text(case, key: str, value) -> str:
    """A case parameter as it would be typed: sizes with their suffix (1G, not 1073741824)."""
    text = ",".join(str(x) for x in value) if isinstance(value, list) else str(value)
    try:
        kind = case.param(key).kind
    except UsageError:            # a label the case adds (variant, tunables), not a parameter
        return text
    return fmt_size_arg(text) if kind in ("size", "sizes") else text


def _numeric(text: str) -> bool:
    return bool(text) and (text[0].isdigit() or text[0] in "+-") or text == "n/a"


# check's whole-process table: every counted syscall, mprotect too (glibc's arenas grow their
# heaps with it; one row leaves room for the column the wide compare tables do without).
CHECK_SYSCALLS = (*SYSCALL_COLUMNS, "mprotect")


def build_check(run: StoredRun) -> Report:
    """`memsleuth check`: each region with its evidence, the whole process, and the findings."""
    a = analyse_check(run)
    cell, measured = a.cell, a.measured
    header = [f"command: {command_text(cell.command)}",
              f"allocator {cell.allocator.name} {cell.allocator.version}; {len(measured)} run(s); "
              f"status {', '.join(sorted({s.status for s in measured})) or 'none'}; {run.created_at}",
              f"machine: {run.machine.cpu_model}, kernel {run.machine.kernel}, THP {run.machine.thp}",
              *environment_lines(run.cells), *leftover_lines(run.cells)]
    if (cell.where or {}).get("skipped"):
        header.append(str(cell.where["skipped"]))
    if measured and measured[-1].stdout_tail.strip():
        header.append("program output (last run, tail): " +
                      " | ".join(measured[-1].stdout_tail.strip().splitlines()[-3:]))
    tables = []
    region_rows = [[sc.name, str(count), fmt_count(sc.ops or 0), fmt_seconds(sc.wall_ns), fmt_seconds(sc.user_ns),
                    fmt_seconds(sc.sys_ns), fmt_count(sc.minflt), fmt_bytes((sc.rss_growth_kb or 0) * 1024),
                    fmt_bytes(sc.brk_delta_bytes or 0),
                    " ".join(f"{k}={v:,.0f}" for k, v in sc.syscalls.items() if k in SYSCALL_COLUMNS and v) or "-"]
                   for sc, count in a.regions]
    if region_rows:
        tables.append(Table("Regions (median per occurrence)", ["region", "per run", "ops", "wall", "user", "sys",
                                                                "minor faults", "RSS growth", "brk moved",
                                                                "syscalls"], region_rows,
                            align_right={1, 2, 3, 4, 5, 6, 7, 8}))
    else:
        header.append("no probe regions: the figures are the whole process's (mark the timed part with "
                      "ms_region_begin/ms_region_end)")
    if a.view.samples:
        p = a.view.process
        tables.append(Table("Whole process (median)", ["wall", "user", "sys", "minor faults", "major faults",
                                                        "peak RSS", *CHECK_SYSCALLS],
                            [[fmt_seconds(p.wall_ns), fmt_seconds(p.user_ns), fmt_seconds(p.sys_ns), fmt_count(p.minflt),
                              fmt_count(p.majflt), fmt_bytes((a.view.maxrss_kb or 0) * 1024),
                              *[fmt_count(p.syscalls.get(s)) if s in p.syscalls else "n/a" for s in CHECK_SYSCALLS]]],
                            align_right=set(range(6 + len(CHECK_SYSCALLS)))))
    tables += memory_view_tables(a.view.heap)
    timeline = timeline_table(a.view.median_sample)
    if timeline:
        tables.append(timeline)
    elif a.view.samples:
        header.append("no timeline: the program ended within one sampling tick")
    if a.failed:
        rows = [[failure_label(s), s.detail or "", " | ".join(s.stderr_tail.strip().splitlines()[-5:]) or "(empty)"]
                for s in a.failed]
        tables.append(Table("Failures", ["status", "detail", "stderr tail"], rows,
                            failed={(r, 0) for r in range(len(rows))}))
    fig = timeline_figure(cell.label, a.view.samples)
    comp = composition_figure(cell.label, a.view)
    footer = []
    from memsleuth.findings import tries
    names = [t.name for t in tries.for_findings(a.findings, cell.allocator.name, list(tries.OTHER_ALLOCATORS))]
    if names and "--try" not in run.argv:
        footer.append(f"The advice above is untried. `memsleuth check --try -- {command_text(cell.command)}` measures "
                      f"the changes it names against this program ({', '.join(names)}; the allocators that are "
                      "installed) and says which help.")
    return Report(f"memsleuth check — run {run.id}", header, tables, footer, a.findings, quiet=a.quiet,
                  figures=[f for f in (comp, fig) if f],
                  command=memsleuth_command(run.argv), run=run)


def memory_view_tables(h: dict | None) -> list[Table]:
    """check: what the resident memory is made of, and the allocations, from the heap accounting
    of the explaining run (heap.py computes every number)."""
    if not h:
        return []
    from memsleuth import heap

    def size(v):
        return "-" if v is None else fmt_bytes(v)
    rows = [[what, str(p) if "count" in what and p is not None else size(p),
             str(e) if "count" in what and e is not None else size(e)] for what, p, e in heap.composition(h)]
    comp = Table("Memory: what the resident memory is made of (heap accounting, explaining run)",
                 ["", "at the live peak", "at exit"], rows,
                 ["Live heap: the usable bytes of every block malloc handed out and the program has not freed, counted "
                  "by a library preloaded in front of the allocator (libmsheap) in one explaining run, never in a "
                  "measured one; its own tables add a few MiB of the anonymous memory. 'At the live peak': read when "
                  "live bytes had grown 10% past the previous reading (so within 10% of the peak)."],
                 align_right={1, 2})
    dur = h.get("duration_s") or 0
    sizes = "; ".join(f"{share:.0%} of calls ask {fmt_bytes(lo)}-{fmt_bytes(hi)}" for lo, hi, share in heap.size_profile(h))
    alloc_rows = [["allocations / frees", f"{h.get('allocs', 0):,} / {h.get('frees', 0):,}"
                   + (f" ({h.get('allocs', 0) / dur:,.0f} allocations/s)" if dur else "")],
                  ["bytes requested", fmt_bytes(h.get("requested_bytes"))],
                  ["request sizes", sizes or "-"],
                  ["live at the peak / at exit",
                   f"{fmt_bytes(h.get('peak_live_bytes'))} / {fmt_bytes(h.get('live_bytes'))}"]]
    for key, what in (("alloc_bytes", "allocated"), ("peak_bytes", "live at the peak"), ("live_bytes", "live at exit")):
        top = sorted((s for s in h.get("sites") or [] if s.get(key, 0) > 0), key=lambda s: -s[key])[:3]
        if top:
            alloc_rows.append([f"most bytes {what}", "; ".join(f"{s['site']} ~{fmt_bytes(s[key])}" for s in top)])
    allocs = Table("Allocations (heap accounting)", ["", "value"], alloc_rows,
                   [f"Call sites from allocation stacks sampled by bytes (one per {fmt_bytes(h.get('sample_bytes'))} "
                    "allocated on average, each counting for the bytes it stands for): estimates, ~."])
    return [comp, allocs]


def composition_figure(label: str, view) -> CompositionFigure | None:
    """The explaining run's timeline (RSS, anonymous) with the heap accounting's live bytes at each
    tick (the last live reading at or before it)."""
    s = next((x for x in view.explain if x.heap and x.timeline), None)
    if s is None:
        return None
    t, rss, anon = s.timeline.times_ms, s.timeline.column("rss_kb"), s.timeline.column("anon_kb")
    tl = s.heap.get("timeline") or []
    if not t or not rss or not anon or len(t) < MIN_PLOT_POINTS or not tl:
        return None
    live, k = [], 0
    for ms in t:
        while k + 1 < len(tl) and tl[k + 1][0] <= ms:
            k += 1
        live.append(tl[k][1] / (1 << 20) if tl[k][0] <= ms else 0.0)
    anon_mib = [v / 1024 for v in anon]
    shown_live = [min(lv, a) for lv, a in zip(live, anon_mib)]   # live blocks not yet touched are not resident
    return CompositionFigure(label, [x / 1000 for x in t], shown_live, [a - lv for a, lv in zip(anon_mib, shown_live)],
                             [max(0.0, (r - a) / 1024) for r, a in zip(rss, anon)])


def setup_differences(a: StoredRun, b: StoredRun) -> list[str]:
    """What differs between the setups of two runs besides the code under test: a change in the
    environment, the command, the allocators' versions or the limits can be the whole change."""
    out = []
    env_a = {k: v for c in a.cells for k, v in c.env.items()}
    env_b = {k: v for c in b.cells for k, v in c.env.items()}
    if env_a != env_b:
        def show(e):
            return " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(e.items())) or "(none)"
        out.append(f"WARNING: the environments differ: A {show(env_a)}; B {show(env_b)}")
    cmd_a, cmd_b = a.spec.command, b.spec.command
    if cmd_a != cmd_b:
        out.append(f"WARNING: the commands differ: A {command_text(cmd_a or [a.name])}; B {command_text(cmd_b or [b.name])}")
    ver_a = {x.name: x.version for x in a.machine.allocators}
    ver_b = {x.name: x.version for x in b.machine.allocators}
    changed = [f"{n} {ver_a[n]} -> {ver_b[n]}" for n in ver_a if n in ver_b and ver_a[n] != ver_b[n]]
    if changed:
        out.append("WARNING: allocator versions differ: " + "; ".join(changed))
    if (a.spec.timeout_s, a.spec.mem_limit_bytes) != (b.spec.timeout_s, b.spec.mem_limit_bytes):
        out.append("note: the runs had different limits (timeout, memory cap)")
    return out


def who_text(f) -> str | None:
    """Who makes a finding's costly calls, as the evidence decided it (analysis.attribute)."""
    if not getattr(f, "calls", None):
        return None
    if f.who == "program":
        return f"the program (its own code makes the {f.calls} calls: see the evidence)"
    if f.who == "allocator":
        return f"the allocator (it makes the {f.calls} calls: see the evidence)"
    return (f"not determined: run `memsleuth compare` under two allocators (the {f.calls} calls are the "
            "program's if their count does not change), or look at the call sites (`--where`)")


TIMELINE_ROWS = 10   # the terminal and Markdown timeline: this many slices of the run


def timeline_table(sample) -> Table | None:
    """The run's timeline in a few slices: resident memory and the heap at the end of each, and
    the fault and system call rates within it (from the running totals ms-run sampled)."""
    t = sample.timeline if sample else None
    if t is None or len(t.rows) < 2:
        return None
    times = t.times_ms
    n = min(TIMELINE_ROWS, len(t.rows) - 1)
    cuts = [round(k * (len(t.rows) - 1) / n) for k in range(n + 1)]
    rate_cols = [c for c in ("page-faults-minor", *SYSCALL_COLUMNS) if c in t.columns and
                 (t.column(c) or [0])[-1] > (t.column(c) or [0])[0]]
    cols = ["from", "to", "RSS", "heap"] + [("faults/s" if c == "page-faults-minor" else f"{c}/s") for c in rate_cols]
    rows = []
    for a, b in zip(cuts, cuts[1:]):
        dt = (times[b] - times[a]) / 1000 or 1e-3
        row = [f"{times[a] / 1000:.2f} s", f"{times[b] / 1000:.2f} s",
               fmt_bytes((t.column("rss_kb") or [0])[b] * 1024),
               fmt_bytes((t.column("heap_kb") or [0])[b] * 1024) if "heap_kb" in t.columns else "n/a"]
        for c in rate_cols:
            v = t.column(c)
            row.append(fmt_si((v[b] - v[a]) / dt))
        rows.append(row)
    notes = [f"Median run, sampled every {t.interval_ms} ms for the whole process tree; rates are differences of "
             "running totals over each slice."]
    return Table("Timeline (median run)", cols, rows, notes, align_right=set(range(2, len(cols))))


# ---- figures: the numbers the HTML report draws (drawn by report/html.py, computed here) ----

def _group_label(g: Group, swept: list[str]) -> str:
    """A plot's name for a group: its swept values; "all cells" when nothing is swept (never "-")."""
    text = _params_text(g.cells[0].cell.params, swept) if g.cells else ""
    return "all cells" if text in ("", "-") else text


def throughput_figure(groups: list[Group], swept: list[str], title: str = "") -> ThroughputFigure | None:
    cells = [c for g in groups for c in g.cells]
    if not any(c.estimate for c in cells):
        return None
    hib = next(c.higher_is_better for c in cells if c.estimate)
    labels = [_group_label(g, swept) for g in groups]
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
    labels = [_group_label(g, swept) for g in groups]
    ratio = [[None] * len(groups) for _ in allocs]
    resolved = [[False] * len(groups) for _ in allocs]
    for gi, g in enumerate(groups):
        for c in g.cells:
            ai = allocs.index(c.cell.contender)
            if c.ratio is not None:
                ratio[ai][gi] = c.ratio.median
                resolved[ai][gi] = c.best_resolved or (c.verdict is not None and c.verdict.kind != "unresolved")
    return RatioFigure(labels, allocs, ratio, resolved)


# A timeline plot needs this many points in its median run: a run shorter than ~50 ms has only its
# start and its end, and a line between them says nothing.
MIN_PLOT_POINTS = 5


# A case's memory-over-time panel is drawn only when the median run's resident memory moved: a
# flat line says nothing a table does not (thread-heap had 30 of them).
FLAT_RSS_SHARE = 0.10
FLAT_RSS_MIB = 4.0


def flat_timeline(fig: TimelineFigure) -> bool:
    _, rss = fig.runs[fig.median]
    return not rss or max(rss) - min(rss) < max(FLAT_RSS_MIB, FLAT_RSS_SHARE * max(rss))


def timeline_figure(label: str, samples: list) -> TimelineFigure | None:
    runs, walls = [], []
    for s in samples:
        t = s.timeline
        rss = t.column("rss_kb") if t else None
        if not rss or len(rss) < 2:
            continue
        runs.append(([x / 1000 for x in t.times_ms], [v / 1024 for v in rss]))
        walls.append((s.wall_ns, len(runs) - 1, s))
    if not runs:
        return None
    walls.sort(key=lambda w: w[0])
    _, median, sample = walls[(len(walls) - 1) // 2]
    t = sample.timeline
    if len(t.rows) < MIN_PLOT_POINTS:
        return None
    times = [x / 1000 for x in t.times_ms]
    rates = {}
    for col, name in (("page-faults-minor", "page faults"), *((c, c) for c in SYSCALL_COLUMNS)):
        v = t.column(col)
        if not v or v[-1] <= v[0]:
            continue
        mids = [(a + b) / 2 for a, b in zip(times, times[1:])]
        per_s = [(y - x) / max(b - a, 1e-3) for x, y, a, b in zip(v, v[1:], times, times[1:])]
        rates[name] = (mids, per_s)
    return TimelineFigure(label, runs, median, rates)


def build_suite(runs: list[StoredRun], argv: list[str] | None = None, interrupted: bool = False) -> Report:
    """`compare --suite`: allocator x workload, the throughput ratio to each workload's fastest
    (paired by round) with the peak RSS beside it, and the geometric mean over the workloads."""
    from memsleuth.suite import geometric_mean, summarise
    contenders, names, entries = summarise(runs)
    cols = ["allocator", *names, "geometric mean"]
    rows, failed = [], set()
    for i, who in enumerate(contenders):
        row = [who]
        for j, name in enumerate(names):
            e = entries.get((who, name))
            if e is None:
                row.append("-")
            elif e.status != "ok":
                row.append(e.status)
                failed.add((i, j + 1))
            else:
                ratio = "-" if e.ratio is None else f"{e.ratio:.2f}x" + ("" if e.resolved else " n.r.")
                rss = f" · {fmt_bytes(e.peak_rss_kb * 1024)}" if e.peak_rss_kb else ""
                row.append(ratio + rss)
        gm = geometric_mean([e.ratio for name in names if (e := entries.get((who, name))) and e.ratio])
        row.append(f"{gm:.2f}x" if gm else "-")
        rows.append(row)
    notes = ["Each entry: throughput (region main) relative to the workload's fastest allocator, the median of "
             "per-round ratios (1.00x = fastest; n.r. = not resolved beyond the noise threshold), and the median "
             "peak RSS of the whole process. Full report of a workload: memsleuth show RUN (runs: "
             + ", ".join(f"{r.name} {r.id}" for r in runs) + ")."]
    machine = _machine_lines(runs[0]) if runs else []
    header = [f"{len(runs)} workloads; {runs[0].spec.rounds if runs else ''}", *machine]
    footer = ["Interrupted: the table shows the workloads that finished."] if interrupted else []
    fig = RatioFigure(names, contenders,
                      [[(e.ratio if (e := entries.get((who, n))) and e.ratio else None) for n in names]
                       for who in contenders],
                      [[bool((e := entries.get((who, n))) and e.resolved) for n in names] for who in contenders])
    return Report("memsleuth compare --suite", header,
                  [Table("Allocator suite", cols, rows, notes, align_right=set(range(1, len(cols))), failed=failed)],
                  footer, figures=[fig], command=memsleuth_command(argv or []), run=runs[-1] if runs else None)


def machine_fingerprint(run: StoredRun) -> list[str]:
    m = run.machine
    return [str(run.id), m.name, m.hostname or "-", f"{m.cpu_model} x{m.cpus}", " ".join(m.cpu_flags) or "-",
            m.kernel or "-", m.thp or "-", str(m.numa_nodes) if m.numa_nodes else "-", m.glibc or "-",
            m.governor or "none visible",
            "; ".join(f"{a.name} {a.version}" for a in m.allocators) or "-"]


def _same_machines(runs: list[StoredRun]) -> str | None:
    """A warning when two runs' machines have the same fingerprint (host, CPU, flags, kernel)."""
    seen: dict[tuple, int] = {}
    for r in runs:
        m = r.machine
        key = (m.hostname, m.cpu_model, m.cpus, tuple(m.cpu_flags), m.kernel, m.numa_nodes)
        if key in seen:
            return (f"runs {seen[key]} and {r.id} have the same machine fingerprint (host {m.hostname}, {m.cpu_model} "
                    f"x{m.cpus}, kernel {m.kernel}): a difference between them is one machine's run-to-run variation, "
                    "not a difference between machines")
        seen[key] = r.id
    return None


def build_machines(runs: list[StoredRun], argv: list[str] | None = None) -> Report:
    """`show RUN RUN ...`: the same cells measured on different machines, side by side. Per cell and
    machine: the metric, the ratio to the fastest allocator on that machine (paired by round, as
    the run itself computed it), and the ratio to the fastest machine for that cell (separate runs:
    bootstrap ratio of medians)."""
    from memsleuth.regression import cell_key, compare_machines
    keys, matrix = compare_machines(runs)
    names = [f"{r.machine.name} (run {r.id})" for r in runs]
    noise = min(r.spec.noise for r in runs)
    rows, failed = [], set()
    ratios: dict[str, list[float | None]] = {k: [] for k in keys}
    resolved: dict[str, list[bool]] = {k: [] for k in keys}
    for key, row in zip(keys, matrix):
        for mc in row:
            c = mc.summary
            if c is None or c.estimate is None:
                rows.append([key, names[mc.run], "-" if c is None else c.label, "-", "-"])
                if c is not None:
                    failed.add((len(rows) - 1, 2))
                ratios[key].append(None)
                resolved[key].append(False)
                continue
            text, ci = _metric_text(c)
            within = "fastest" if c.is_best else (c.verdict.text if c.verdict else "-")
            across = "fastest machine" if mc.fastest_machine else (mc.verdict.text if mc.verdict else "-")
            if mc.verdict_normalised is not None:
                across += f"; normalised by each run's reference: {mc.verdict_normalised.text}"
            ratios[key].append(1.0 if mc.fastest_machine else (mc.vs_fastest.median if mc.vs_fastest else None))
            resolved[key].append(mc.fastest_machine or bool(mc.verdict and mc.verdict.kind != "unresolved"))
            rows.append([key, names[mc.run], f"{text} {ci}", within, across])
    tables = [Table("By machine", ["cell", "machine", "metric [95% CI]", "vs the fastest allocator on this machine",
                                   "vs the fastest machine for this cell"], rows,
                    ["Within a machine, the paired per-round ratio its run computed; across machines, separate runs "
                     "(never paired): the ratio of medians with a seeded bootstrap 95% CI, called beyond "
                     f"±{noise:.0%}; where every run has the reference cell, also with each run's rounds divided by "
                     "its own reference (a shift of a whole machine between runs cancels)."],
                    failed=failed),
              Table("Machines", ["run", "machine", "host", "CPU", "memory-relevant CPU flags", "kernel", "THP",
                                 "NUMA nodes", "glibc", "governor", "allocators"],
                    [machine_fingerprint(r) for r in runs])]
    header = [f"{len(runs)} runs of {runs[0].kind} {runs[0].name}, by machine"]
    specs = {(r.kind, r.name, tuple(sorted(cell_key(c) for g in analyse_run(r).groups for c in g.cells))) for r in runs}
    if len(specs) > 1:
        header.append("WARNING: the runs measured different cells or programs: only cells present in several runs "
                      "compare across machines")
    same = _same_machines(runs)
    if same:
        header.append("WARNING: " + same)
    fig = RatioFigure(names, keys, [ratios[k] for k in keys], [resolved[k] for k in keys],
                      caption="Per cell, each machine's time over the fastest machine's: separate runs, a bootstrap "
                              "ratio of medians (1.00 = fastest machine); n.r. = not resolved beyond the noise.")
    return Report("memsleuth show — by machine", header, tables, figures=[fig], command=memsleuth_command(argv or []),
                  run=runs[-1])
