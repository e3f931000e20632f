"""The report as data: titled tables of already-formatted strings, plus notes.

Terminal and Markdown render the same model, so the two formats never disagree on a number.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from memsleuth.analysis import CellSummary, Group, RunAnalysis, analyse_check, analyse_run, failure_label
from memsleuth.evidence import HARDWARE_EVENTS
from memsleuth.store import StoredRun
from memsleuth.units import fmt_bytes, fmt_count, fmt_seconds, fmt_si

SYSCALL_COLUMNS = ("mmap", "munmap", "madvise", "brk", "futex")
HW_SHORT = {"cycles": "cycles", "instructions": "instr", "cache-references": "cache-ref", "cache-misses": "cache-miss",
            "branch-misses": "br-miss", "L1-dcache-load-misses": "L1d-miss", "dTLB-load-misses": "dTLB-miss"}


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)
    align_right: set[int] = field(default_factory=set)


@dataclass
class Report:
    title: str
    header: list[str]
    tables: list[Table]
    footer: list[str] = field(default_factory=list)
    findings: list = field(default_factory=list)   # memsleuth.findings.Finding, rendered as blocks
    question: str | None = None                    # a case study's question, shown before the tables
    statements: list[str] = field(default_factory=list)   # a case's "what the evidence shows"


def _params_text(params: dict, swept: list[str]) -> str:
    return ", ".join(f"{k}={params[k]}" for k in swept if k in params) or "-"


def _metric_text(c: CellSummary) -> tuple[str, str]:
    e = c.estimate
    if e is None:
        return failure_label(c.failures[0]) if c.failures else "NO DATA", ""
    unit = "ops/s" if c.metric == "ops_per_s" else "s"
    fmt = fmt_si if c.metric == "ops_per_s" else (lambda x: f"{x:.4g}")
    ci = f"[{fmt(e.low)}, {fmt(e.high)}]" if e.low is not None else f"n/a (n={e.n} < 6)"
    return f"{fmt(e.median)} {unit}", ci


def _verdict_text(c: CellSummary) -> str:
    """Against the group's fastest, from per-round ratios; called only beyond the noise threshold."""
    if c.estimate is None:
        return "-"
    if c.is_best:
        return "fastest"
    return c.verdict.text if c.verdict else "-"


def _n_text(c: CellSummary, target: float | None) -> str:
    n = f"{len(c.ok_samples)}" + (f" (+{len(c.failures)} failed)" if c.failures and c.ok_samples else "")
    hw = c.estimate.half_width_rel if c.estimate else None
    if hw is None:
        return n
    mark = "" if target is None else (" ok" if hw <= target else " (target not reached)")
    return f"{n}, ±{hw:.1%}{mark}"


def throughput_table(run: StoredRun, groups: list[Group], swept: list[str]) -> Table:
    metric_name = "throughput (region main)" if any(
        c.metric == "ops_per_s" for g in groups for c in g.cells) else "wall time (whole process)"
    target = run.spec.get("target_ci")
    cols = ([", ".join(swept)] if swept else []) + ["allocator", metric_name, "95% CI", "vs fastest (paired)",
                                                    "runs, CI half-width"]
    rows = []
    for g in groups:
        for c in g.cells:
            value, ci = _metric_text(c)
            row = ([_params_text(c.cell.params, swept)] if swept else []) + [c.cell.allocator["name"], value, ci,
                                                                           _verdict_text(c), _n_text(c, target)]
            rows.append(row)
    notes = []
    if any(g.checksum_mismatch for g in groups):
        notes.append("WARNING: workload checksums differ between allocators or runs of the same parameters: "
                     "the work done was not the same.")
    noise = run.spec.get("noise", 0.01)
    notes.append("Median of the runs with a distribution-free 95% CI (order statistics). 'vs fastest' is the "
                 "median of per-round ratios against the group's fastest with its 95% CI, called only when the "
                 f"whole CI lies beyond ±{noise:.0%}.")
    return Table("Throughput", cols, rows, notes, align_right={len(cols) - 4})


def evidence_table(groups: list[Group], swept: list[str]) -> Table:
    cells = [c for g in groups for c in g.cells if c.estimate is not None]
    have_hw = any(v is not None for c in cells for v in c.evidence.hardware.values())
    cols = ([", ".join(swept)] if swept else []) + ["allocator", "user s", "sys s", "sys %", "minor faults",
                                                    "major faults", "peak RSS", *SYSCALL_COLUMNS]
    cols += [HW_SHORT[h] for h in HARDWARE_EVENTS] if have_hw else ["hw counters"]
    rows = []
    for c in cells:
        e = c.evidence
        row = ([_params_text(c.cell.params, swept)] if swept else []) + [c.cell.allocator["name"]]
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
    scopes = {c.evidence.scope for c in cells}
    notes = [f"Medians per run. Time, faults and syscalls are from {' / '.join(sorted(scopes)) or 'n/a'}; "
             "peak RSS is the whole process's."]
    unsupported = next((c.evidence.unsupported for c in cells if c.evidence.unsupported), {})
    if unsupported:
        reasons: dict[str, list[str]] = {}
        for ev, why in unsupported.items():
            reasons.setdefault(why, []).append(ev)
        for why, evs in reasons.items():
            notes.append(f"Not measured: {', '.join(evs)} ({why}).")
    return Table("Evidence", cols, rows, notes, align_right=set(range(len(cols) - 1)) - {0, 1})


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
                            [c.cell.allocator["name"], failure_label(s), f"{s.detail or ''} (x{count})", tail[-300:]])
    if not rows:
        return None
    cols = ([", ".join(swept)] if swept else []) + ["allocator", "status", "detail", "stderr tail"]
    return Table("Failures", cols, rows)


def build(run: StoredRun) -> Report:
    swept = list(run.spec.get("swept", []))
    a = analyse_run(run)
    groups = a.groups
    m = run.machine
    what = f"workload {run.name}" if run.kind == "workload" else f"command: {' '.join(run.spec.get('command', []))}"
    header = [
        f"{what}; {run.spec.get('rounds') or str(run.spec.get('reps')) + ' interleaved rounds'} + "
        f"{run.spec.get('warmup', 1)} warm-up per cell; "
        f"status {run.status}; {run.created_at}",
        f"machine: {m.get('cpu_model')} x{m.get('cpus')}, kernel {m.get('kernel')}, glibc {m.get('glibc')}, "
        f"THP {m.get('thp')}, load {m.get('loadavg_1m', 0):.2f}",
        "allocators: " + "; ".join(f"{a['name']} {a['version']}" for a in m.get("allocators", [])),
    ]
    fixed = {k: v for k, v in (run.cells[0].params.items() if run.cells else []) if k not in swept}
    if fixed:
        header.append("parameters: " + ", ".join(f"{k}={v}" for k, v in fixed.items()))
    tables = [throughput_table(run, groups, swept), evidence_table(groups, swept)]
    for extra in (failures_table(groups, swept), quality_table(a)):
        if extra:
            tables.append(extra)
    footer = []
    if run.status == "interrupted":
        footer.append("This run was interrupted: the tables show the samples that finished.")
    return Report(f"memsleuth compare — run {run.id}", header, tables, footer, a.all_findings)


def build_diff(a: StoredRun, b: StoredRun, changes, threshold: float) -> Report:
    """`memsleuth diff A B`: one row per matched cell, made to be pasted into a pull request."""
    def value(c) -> str:
        if c is None:
            return "-"
        text, ci = _metric_text(c)
        return text if c.estimate is None else f"{text} {ci}"

    rows = []
    for ch in changes:
        s = ch.slowdown
        rows.append([ch.key, value(ch.before), value(ch.after),
                     f"{(s.median - 1) * 100:+.1f}% time" if s else "-",
                     ("REGRESSION: " if ch.regression else "") + ch.verdict.text])
    regressions = sum(ch.regression for ch in changes)
    header = [f"A: run {a.id} ({a.created_at}, {a.name}, {a.machine.get('hostname')})",
              f"B: run {b.id} ({b.created_at}, {b.name}, {b.machine.get('hostname')})",
              f"threshold: a change is called only when its whole 95% CI lies beyond ±{threshold:.0%}",
              "A and B ran at different times, so a shift of the whole machine between them is not cancelled (as it "
              "is between interleaved rounds) and reads as a change: choose a threshold above your machine's "
              "run-to-run shift (docs/statistics.md)"]
    if a.machine.get("cpu_model") != b.machine.get("cpu_model") or a.machine.get("kernel") != b.machine.get("kernel"):
        header.append("WARNING: the runs were made on different machines or kernels")
    table = Table("Changes, B against A", ["cell", "A", "B", "median change", "verdict"], rows,
                  ["Change = B's time per op (or per run) / A's, median ratio with a seeded bootstrap 95% CI "
                   "(separate runs cannot be paired by round)."], align_right={3})
    footer = [f"{regressions} regression(s) resolved beyond the threshold." if regressions else
              "No regression resolved beyond the threshold."]
    return Report(f"memsleuth diff — run {a.id} vs run {b.id}", header, [table], footer)


def _machine_lines(run: StoredRun) -> list[str]:
    m = run.machine
    return [f"machine: {m.get('cpu_model')} x{m.get('cpus')}, kernel {m.get('kernel')}, glibc {m.get('glibc')}, "
            f"THP {m.get('thp')}, load {m.get('loadavg_1m', 0):.2f}",
            "allocators: " + "; ".join(f"{a['name']} {a['version']}" for a in m.get("allocators", []))]


def build_case(run: StoredRun) -> Report:
    """`memsleuth case NAME`: the question, the case's tables, what the evidence shows, and failures."""
    from memsleuth import cases
    from memsleuth.analysis import analyse
    case = cases.get(run.name)
    result = case.analyse(run)
    params = run.spec.get("case_params", {})
    header = [f"case {case.name} (seed {case.seed}); {run.spec.get('rounds')} + {run.spec.get('warmup', 0)} "
              f"warm-up per cell; status {run.status}; {run.created_at}", *_machine_lines(run)]
    if params:
        header.append("parameters: " + ", ".join(
            f"{k}={','.join(v) if isinstance(v, list) else v}" for k, v in params.items()))
    tables = [Table(t.title, t.columns, t.rows, t.notes,
                    align_right={i for i, c in enumerate(t.columns) if i and t.rows and
                                 all(_numeric(r[i]) for r in t.rows)})
              for t in result.tables]
    swept = list(run.spec.get("swept", []))
    failed = failures_table(analyse(run), swept)
    if failed:
        tables.append(failed)
    footer = ["This run was interrupted: the tables show the samples that finished."] if run.status == "interrupted" else []
    return Report(f"memsleuth case {case.name} — run {run.id}", header, tables, footer,
                  question=result.question, statements=result.statements)


def _numeric(text: str) -> bool:
    return bool(text) and (text[0].isdigit() or text[0] in "+-") or text == "n/a"


def build_check(run: StoredRun) -> Report:
    """`memsleuth check`: each region with its evidence, the whole process, and the findings."""
    a = analyse_check(run)
    cell, measured = a.cell, a.measured
    header = [f"command: {' '.join(cell.command)}",
              f"allocator {cell.allocator['name']} {cell.allocator.get('version', '')}; {len(measured)} run(s); "
              f"status {', '.join(sorted({s.status for s in measured})) or 'none'}",
              f"machine: {run.machine.get('cpu_model')}, kernel {run.machine.get('kernel')}, THP {run.machine.get('thp')}"]
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
                                                        "peak RSS", *SYSCALL_COLUMNS],
                            [[fmt_seconds(p.wall_ns), fmt_seconds(p.user_ns), fmt_seconds(p.sys_ns), fmt_count(p.minflt),
                              fmt_count(p.majflt), fmt_bytes((a.view.maxrss_kb or 0) * 1024),
                              *[fmt_count(p.syscalls.get(s)) if s in p.syscalls else "n/a" for s in SYSCALL_COLUMNS]]],
                            align_right=set(range(5 + len(SYSCALL_COLUMNS)))))
    if a.failed:
        rows = [[failure_label(s), s.detail or "", " | ".join(s.stderr_tail.strip().splitlines()[-5:]) or "(empty)"]
                for s in a.failed]
        tables.append(Table("Failures", ["status", "detail", "stderr tail"], rows))
    return Report(f"memsleuth check — run {run.id}", header, tables, [], a.findings)
