"""`memsleuth history --trend`: the steps found in every cell's series first, then the series.
Every number comes from trend.py; this module words and lays them out."""
from __future__ import annotations

from memsleuth.analysis import trend
from memsleuth.units import fmt_value
from memsleuth.report.content import Report, Table, TrendFigure
from memsleuth.report.wording import memsleuth_command

# At most this many series are drawn in the HTML report: every one with a step, then time series.
MAX_FIGURES = 24


def build(all_series: list[trend.Series], runs: int, argv: list[str], time_threshold: float,
          count_threshold: float) -> Report:
    stepped = [s for s in all_series if s.steps]
    header = [f"{runs} stored runs read; {len(all_series)} series (a cell and a metric measured in two runs or "
              "more); time is per op (or per run) and lower is better",
              "steps: exact optimal partitioning (L1) of each series' logarithm in units of its own run-to-run "
              f"noise, a penalty of {trend.PENALTY_PER_LN_N:g} ln n per step, segments of {trend.MIN_SEGMENT} runs or "
              "more; reported only from "
              f"±{time_threshold:.0%} (time) and ±{count_threshold:.0%} (counts, and beyond their floors)"]
    rows, failed = [], set()
    for s in stepped:
        for st in s.steps:
            if st.change > 1:
                failed.add((len(rows), 5))
            rows.append([s.cell, s.metric, str(st.run), fmt_value(st.before, s.unit), fmt_value(st.after, s.unit),
                         f"{(st.change - 1) * 100:+.1f}%"])
    tables = []
    if rows:
        tables.append(Table("Steps found (the first run at the new level)",
                            ["cell", "metric", "run", "before", "after", "change"], rows,
                            ["before/after: the median of the runs in the segment on each side; higher is worse "
                             "for every metric here"], align_right={2, 3, 4, 5}, failed=failed))
    series_rows = []
    for s in all_series:
        if s.metric != "time" and not s.steps:
            continue
        series_rows.append([s.cell, s.metric, str(len(s.points)), f"{s.points[0].run}..{s.points[-1].run}",
                            fmt_value(s.points[0].value, s.unit), fmt_value(s.points[-1].value, s.unit),
                            f"±{s.sigma * 100:.1f}%" if s.sigma is not None else "-",
                            ", ".join(f"run {st.run}" for st in s.steps) or "none"])
    quiet = len([s for s in all_series if s.metric != "time" and not s.steps])
    tables.append(Table("Series", ["cell", "metric", "runs", "run ids", "first", "latest", "run-to-run noise",
                                   "steps"], series_rows,
                        [f"Time series, and every series with a step; {quiet} count series without a step are left "
                         "out. Noise: the mean absolute deviation of the logarithm, from neighbouring runs (robust), "
                         "as a ratio."],
                        align_right={2, 4, 5, 6}))
    answer = ([f"{sum(len(s.steps) for s in stepped)} step(s) in {len(stepped)} series; the latest at run "
               f"{max(st.run for s in stepped for st in s.steps)}"] if stepped else
              ["No step found in any series (at these thresholds)"] if all_series else
              ["Nothing to trend: no cell was measured in two runs or more"])
    figures = [TrendFigure(s.cell, s.metric, s.unit, [(p.run, p.value, p.low, p.high) for p in s.points],
                           [st.run for st in s.steps])
               for s in (stepped + [s for s in all_series if s.metric == "time" and not s.steps])[:MAX_FIGURES]]
    return Report("memsleuth history --trend", header, tables, answer=answer, figures=figures,
                  command=memsleuth_command(argv))
