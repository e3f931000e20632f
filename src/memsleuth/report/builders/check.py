"""`memsleuth check`: each region with its evidence, the whole process, what the resident memory
is made of, the timeline and the findings."""
from __future__ import annotations

from memsleuth.analysis import cpu_time, memory
from memsleuth.records import cpu_profile
from memsleuth.records.heap import Heap
from memsleuth.analysis.summary import CheckAnalysis, failure_label
from memsleuth.events import SYSCALL_COLUMNS
from memsleuth.records.stored import StoredRun
from memsleuth.report.content import CompositionFigure, Report, Table
from memsleuth.report.sections import MIN_PLOT_POINTS, flame_figures, timeline_figure
from memsleuth.report.wording import (
    command_text,
    environment_lines,
    failures_answer,
    findings_answer,
    leftover_lines,
    memsleuth_command,
)
from memsleuth.units import fmt_bytes, fmt_count, fmt_seconds, fmt_si


# check's whole-process table: every counted syscall, mprotect too (glibc's arenas grow their
# heaps with it; one row leaves room for the column the wide compare tables do without).
CHECK_SYSCALLS = (*SYSCALL_COLUMNS, "mprotect")


def _runs_words(run: StoredRun, n: int) -> str:
    """What was measured: one window (attach), one run, or N runs."""
    if run.attached is not None:
        return "one window on a running process"
    return "1 run" if n == 1 else f"{n} runs"


def build(run: StoredRun, a: CheckAnalysis) -> Report:
    """`memsleuth check`: each region with its evidence, the whole process, and the findings, from
    the run's analysis (analysis.analyse_check)."""
    cell, measured = a.cell, a.measured
    header = [f"command: {command_text(cell.command)}",
              f"allocator {cell.allocator.name} {cell.allocator.version}"
              + (f" (the program's own: {cell.allocator.path})" if cell.allocator.source == "program" else "")
              + f"; {_runs_words(run, len(measured))}; "
              f"status {', '.join(sorted({s.status for s in measured})) or 'none'}; {run.created_at}",
              f"machine: {run.machine.cpu_model}, kernel {run.machine.kernel}, THP {run.machine.thp}",
              *environment_lines(run.cells), *leftover_lines(run.cells)]
    header += attached_lines(run)
    sites = cell.where
    if sites and sites.skipped:
        header.append(sites.skipped)
    header += [f"call sites: {note}" for note in sites.notes] if sites else []
    if sites and sites.unavailable:
        header.append(f"call sites: {sites.unavailable}")
    for s in cell.explain_failures:     # never the program's failure: its measured runs say whether it failed
        tail = " | ".join(s.stderr_tail.strip().splitlines()[-3:])
        header.append(f"explaining run: {failure_label(s)}" + (f": {s.detail}" if s.detail else "")
                      + (f" (stderr, last lines: {tail})" if tail else "")
                      + ("" if cell.explain_samples else "; what it gathers (the CPU samples, the syscalls' arguments, "
                                                         "the heap accounting) is missing from this report"))
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
        title = "Whole process" + ("" if len(measured) <= 1 else f" (median of {len(measured)} runs)")
        tables.append(Table(title, ["wall", "user", "sys", "minor faults", "major faults", "peak RSS", *CHECK_SYSCALLS],
                            [[fmt_seconds(p.wall_ns), fmt_seconds(p.user_ns), fmt_seconds(p.sys_ns), fmt_count(p.minflt),
                              fmt_count(p.majflt), fmt_bytes((a.view.maxrss_kb or 0) * 1024),
                              *[fmt_count(p.syscalls[s]) if s in p.syscalls else "n/a" for s in CHECK_SYSCALLS]]],
                            notes=[a.counting.text] if a.counting else [],
                            align_right=set(range(6 + len(CHECK_SYSCALLS)))))
    tables += cpu_time_tables(a)
    tables += who_ran_table(a)
    tables += memory_view_tables(a.view.heap) or smaps_tables(run)
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
    if a.untried and "--try" not in run.argv:
        footer.append(f"The advice above is untried. `memsleuth check --try -- {command_text(cell.command)}` measures "
                      f"the changes it names against this program ({', '.join(a.untried)}) and says which help.")
    # Where every run failed, the evidence is what a failed run left: no line says nothing costs anything.
    quiet = None if a.failed and len(a.failed) >= len(measured) else a.quiet
    return Report(f"memsleuth check — run {run.id}", header, tables, footer, a.findings, own_subject=cell.label,
                  quiet=quiet,
                  answer=failures_answer(a.failed, measured) + findings_answer(a.findings, quiet, cell.label),
                  figures=[f for f in (comp, fig) if f], later_figures=lambda: flame_figures(run.cells),
                  command=memsleuth_command(run.argv), run=run, analysis=a)


# The CPU time table names every path of at least this share, and every memory path.
SHOWN_PATH_SHARE = 0.01


def cpu_time_tables(a: CheckAnalysis) -> list[Table]:
    """Where the CPU time went, by kernel path, from the explaining run's samples (cpu_profile.py
    classifies them; analysis scales each share to the measured runs' CPU time)."""
    p = a.view.profile
    if not a.cpu_time or p is None:
        return []
    shown, rest = cpu_time.shown_and_rest(a.cpu_time, SHOWN_PATH_SHARE)
    rows = [[part.name, fmt_count(part.samples), f"{part.share:.1%} [{part.low:.1%}, {part.high:.1%}]",
             fmt_seconds(part.ns)] for part in shown]
    if rest:
        rows.append([f"{rest.paths} other paths (each under {SHOWN_PATH_SHARE:.0%})", fmt_count(rest.samples),
                     f"{rest.share:.1%}", fmt_seconds(rest.ns)])
    where = ("attached window (measured and sampled at once)" if a.attached else
             "explaining run (never a measured one)")
    notes = [f"{p.samples:,} samples of the process tree's CPU time, one per {p.period_ns / 1e6:g} ms of it, in the "
             f"{where}, each classified by its kernel call chain: a page fault, a system call by name (a sample in the "
             "entry's own code, which names no call, counted as the calls its executable made, in their "
             "proportions), a thread's or process's exit, other kernel work, or user mode. The findings share "
             "out the measured runs' kernel time in the proportions these samples give each kind of entry, per "
             "event counted in both runs (docs/findings.md, Cost)."]
    if a.explaining_cpu_apart is not None:
        sampled_ns, measured_ns = a.explaining_cpu_apart
        notes.append(f"The explaining run took {fmt_seconds(sampled_ns)} of CPU time against "
                     f"{fmt_seconds(measured_ns)} in the measured runs (its instrumentation: heap accounting, call-site "
                     "sampling): its shares are its own, not the measured runs'.")
    classified, faults, kinds = cpu_time.fault_kinds(p)
    if classified:
        notes.append(f"page faults, where the chain shows what they did ({classified:,} of {faults:,} samples): "
                     + ", ".join(f"{k} {share:.0%}" for k, share in kinds))
    if p.other_top:
        notes.append("other kernel work, by innermost function: " +
                     ", ".join(f"{name} {n:,}" for name, n in p.other_top[:5]))
    if p.why:
        notes.append(f"not usable for costs: {p.why}")
    elif not p.usable:
        notes.append(f"too few samples to cost a mechanism by (under {cpu_profile.MIN_SAMPLES}): the findings' costs "
                     "are estimated from counts")
    tables = [Table("CPU time by kernel path (sampled)", ["path", "samples", "share [95% CI]", "sampled time"], rows,
                    notes,
                    align_right={1, 2, 3})]
    if len(p.executables) > 1:
        exe_rows = [[e.name, fmt_count(e.processes), "-" if e.share is None else f"{e.share:.1%}",
                     "-" if e.user_share is None else f"{e.user_share:.0%}",
                     f"{e.top_path[0]} {e.top_path[1]:.0%}" if e.top_path else "-"] for e in cpu_time.by_executable(p)]
        tables.append(Table("CPU time by executable (sampled)", ["executable", "processes", "share of CPU time",
                                                                 "user mode", "largest kernel path"], exe_rows,
                            ["Each process is named by the program it ran last (its command name after exec)."],
                            align_right={1, 2, 3}))
    return tables


def who_ran_table(a: CheckAnalysis) -> list[Table]:
    """Who ran the CPU time, from the same run's samples with their user call chains
    (analysis/user_time.py decides each sample's part)."""
    if not a.who_ran:
        return []
    s = a.view.cpu_stacks
    rows = [[part.name, fmt_count(part.samples), f"{part.share:.1%} [{part.low:.1%}, {part.high:.1%}]"]
            for part in a.who_ran]
    notes = [f"{s.samples:,} samples of the CPU time, taken beside the kernel-path ones at the same period, each with "
             "the thread's user call chain (frame pointers): in the kernel, the kernel's (its paths are the table "
             "above); in user mode, a runtime's garbage collector where a frame of it is in the chain, a runtime "
             "growing a thread's stack likewise, malloc and free where the innermost frames are theirs, a runtime's "
             "own allocator where they are its, memsleuth's own preloads (the explaining run's heap accounting and "
             "sampler), else the program's and its libraries' own code (docs/findings.md, Who ran the CPU time)."]
    if s.why:
        notes.append(f"not every frame could be named: {s.why}")
    return [Table("CPU time by who ran it (sampled)", ["part", "samples", "share [95% CI]"], rows, notes,
                  align_right={1, 2})]


def _peak_column(h: Heap) -> str:
    at, live, peak = memory.near_peak(h)
    return "at the live peak" if at else f"at live {fmt_bytes(live)} (peak {fmt_bytes(peak)})"


def attached_lines(run: StoredRun) -> list[str]:
    """check --pid: what the window was, and what attaching cannot give."""
    at = run.attached
    if at is None:
        return []
    pids = ", ".join(str(p) for p in at.pids)
    if at.ended_by == "failed":
        return [f"attached to process {pids}: the window measured nothing ({at.why or 'no reason recorded'}); the "
                "process was not started, stopped or signalled"]
    lines = [f"attached to process {pids} for {at.window_s:.1f} s: every figure is this window's "
             "(counts, times, the findings' costs); the process was not started, stopped or signalled"]
    if at.threads_at_start is not None:
        lines.append(f"threads: {at.threads_at_start} at the start, {at.threads_at_end} at the end; those created in "
                     "the window are counted")
    if at.ended_by == "exit":
        lines.append(f"the process exited {(at.exited_at_ns or 0) / 1e9:.1f} s into the window: what was "
                     "measured until then is kept")
    if at.cannot:
        lines.append(f"not measured when attaching: {at.cannot} (`memsleuth check -- CMD` gives it)")
    return lines


def smaps_tables(run: StoredRun) -> list[Table]:
    """check --pid: what resident memory is made of at the end of the window (/proc/PID/smaps)."""
    at = run.attached
    rows = []
    for pid, kinds in at.smaps.items() if at else ():
        rows += [[pid, kind, fmt_bytes(v)] for kind, v in kinds.items()]
        if (a := at.arenas_of(pid)) is not None:
            rows += [[pid, "glibc main arena (brk heap)", fmt_bytes(a.main_arena_rss)],
                     [pid, f"glibc other arenas ({a.arenas}), their heaps", fmt_bytes(a.arena_rss)]]
    if not rows:
        return []
    return [Table("Memory: what the resident memory is made of now (/proc/PID/smaps, at the end of the window)",
                  ["process", "kind", "resident"], rows,
                  ["By mapping: the break's heap, other anonymous memory (mmap'd heaps and arenas, runtimes' heaps), "
                   "stacks, file-backed and shared memory; huge pages and swap are parts of those, shown beside them. "
                   "glibc's arenas (under glibc's malloc): found in the process's memory by their heaps' headers, "
                   "resident bytes from smaps; parts of the heap and anonymous rows."],
                  align_right={2})]


def memory_view_tables(h: Heap | None) -> list[Table]:
    """check: what the resident memory is made of, and the allocations, from the heap accounting
    of the explaining run (heap.py computes every number)."""
    if not h:
        return []
    def size(v):
        return "-" if v is None else fmt_bytes(v)
    rows = [[what, str(p) if "count" in what and p is not None else size(p),
             str(e) if "count" in what and e is not None else size(e)] for what, p, e in memory.composition(h)]
    comp = Table("Memory: what the resident memory is made of (heap accounting, explaining run)",
                 ["", _peak_column(h), "at exit"], rows,
                 ["Live heap: the usable bytes of every block malloc handed out and the program has not freed, counted "
                  "by a library preloaded in front of the allocator (libmsheap) in one explaining run, never in a "
                  "measured one; its own tables add a few MiB of the anonymous memory. The peak column is read when "
                  "live bytes had grown 10% past the previous reading and were within 10% of the peak; a peak "
                  "briefer than the spacing between readings is missed, and the column then names the moment "
                  "read."],
                 align_right={1, 2})
    rate = memory.alloc_rate(h)
    sizes = "; ".join(f"{share:.0%} of calls ask {fmt_bytes(lo)} to {fmt_bytes(hi)}"
                      for lo, hi, share in memory.size_profile(h))
    alloc_rows = [["allocations / frees", f"{h.allocs:,} / {h.frees:,}"
                   + (f" ({rate:,.0f} allocations/s)" if rate is not None else "")],
                  ["bytes requested", fmt_bytes(h.requested_bytes)],
                  ["request sizes", sizes or "-"],
                  ["live at the peak / at exit",
                   f"{fmt_bytes(h.peak_live_bytes)} / {fmt_bytes(h.live_bytes)}"]]
    for key, what in (("alloc_bytes", "allocated"), ("peak_bytes", "live at the peak"), ("live_bytes", "live at exit")):
        top = memory.top_sites(h, key)
        if top:
            alloc_rows.append([f"most bytes {what}", "; ".join(f"{s.site} ~{fmt_bytes(s.bytes_by(key))}" for s in top)])
    notes = [f"Call sites from allocation stacks sampled by bytes (one per {fmt_bytes(h.sample_bytes)} "
             "allocated on average, each counting for the bytes it stands for): estimates, ~."]
    wrapper = memory.wrapper_sites(h)
    if wrapper:
        notes.append(f"Left out: {len(wrapper)} site(s) in a shell's own code ({wrapper[0].site}), a wrapper script "
                     "run before the program (the totals above include them).")
    allocs = Table("Allocations (heap accounting)", ["", "value"], alloc_rows, notes)
    return [comp, allocs]


def composition_figure(label: str, view) -> CompositionFigure | None:
    """The explaining run's resident memory, stacked (memory.composition_series computes it), in MiB."""
    s = next((x for x in view.explain if x.heap and x.timeline), None)
    series = memory.composition_series(s) if s is not None else None
    if series is None or len(series["seconds"]) < MIN_PLOT_POINTS:
        return None
    mib = 1 << 20
    return CompositionFigure(label, series["seconds"], [v / mib for v in series["live"]],
                             [v / mib for v in series["beyond"]], [v / mib for v in series["file"]])


TIMELINE_ROWS = 10   # the terminal and Markdown timeline: this many slices of the run


def timeline_table(sample) -> Table | None:
    """The run's timeline in a few slices: resident memory and the heap at the end of each, and
    the fault and system call rates within it (Timeline.rate, from the running totals ms-run sampled)."""
    t = sample.timeline if sample else None
    if t is None or len(t.rows) < 2:
        return None
    times = t.times_ms
    rate_cols = t.growing(("page-faults-minor", *SYSCALL_COLUMNS))
    cols = ["from", "to", "RSS", "heap"] + [("faults/s" if c == "page-faults-minor" else f"{c}/s") for c in rate_cols]
    rows = []
    for a, b in t.slices(TIMELINE_ROWS):
        row = [f"{times[a] / 1000:.2f} s", f"{times[b] / 1000:.2f} s",
               fmt_bytes((t.column("rss_kb") or [0])[b] * 1024),
               fmt_bytes((t.column("heap_kb") or [0])[b] * 1024) if "heap_kb" in t.columns else "n/a"]
        row += [fmt_si(t.rate(c, a, b)) for c in rate_cols]
        rows.append(row)
    notes = [f"Median run, sampled every {t.interval_ms} ms for the whole process tree; rates are differences of "
             "running totals over each slice."]
    return Table("Timeline (median run)", cols, rows, notes, align_right=set(range(2, len(cols))))
