"""Report sections more than one builder shows: the failures table, memory over time, flame graphs."""
from __future__ import annotations

from memsleuth.analysis import stacks
from memsleuth.analysis.summary import Group, failure_label
from memsleuth.events import SYSCALL_COLUMNS
from memsleuth.records.evidence import median_by_wall
from memsleuth.report.content import FlameFigure, Table, TimelineFigure
from memsleuth.report.wording import params_text


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
                rows.append(([params_text(c.cell.params, swept)] if swept else []) +
                            [c.cell.contender, failure_label(s), f"{s.detail or ''} (x{count})", tail[-300:]])
    if not rows:
        return None
    cols = ([", ".join(swept)] if swept else []) + ["allocator", "status", "detail", "stderr tail"]
    return Table("Failures", cols, rows, failed={(r, status_col) for r in range(len(rows))})


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
    """RSS over time of every run with a timeline, the median run (evidence.median_by_wall) marked,
    and that run's fault and syscall rates (Timeline.rates)."""
    timed = [s for s in samples if s.timeline and len(s.timeline.column("rss_kb") or []) >= 2]
    if not timed:
        return None
    median = median_by_wall(timed)
    t = timed[median].timeline
    if len(t.rows) < MIN_PLOT_POINTS:
        return None
    runs = [([x / 1000 for x in s.timeline.times_ms], [v / 1024 for v in s.timeline.column("rss_kb")]) for s in timed]
    names = {"page-faults-minor": "page faults"}
    rates = {names.get(c, c): t.rates(c) for c in t.growing(("page-faults-minor", *SYSCALL_COLUMNS))}
    return TimelineFigure(label, runs, median, rates)


def flame_figures(cells) -> list[FlameFigure]:
    """A flame graph of every stack set each cell's explaining run sampled (stacks.py)."""
    out = []
    for c in cells:
        for s in stacks.for_cell(c):
            if not s.stacks:
                continue        # a type no sampled stack had (pprof keeps it, empty): nothing to draw
            name = f"{c.label}: {s.name}" if len(cells) > 1 else s.name
            what = {"bytes": "bytes", "nanoseconds": "CPU time"}.get(s.unit, "samples x period")
            out.append(FlameFigure(name, s.unit, stacks.merge(s), f"{name} ({len(s.stacks)} distinct stacks, "
                                                                   f"widths by {what})"))
    return out
