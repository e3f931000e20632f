"""`compare --suite`: allocator x workload, with the geometric mean over the workloads."""
from __future__ import annotations

from memsleuth.records.stored import StoredRun
from memsleuth.report.content import RatioFigure, Report, Table
from memsleuth.report.wording import machine_lines, memsleuth_command
from memsleuth.analysis.suite import SuiteSummary
from memsleuth.units import fmt_bytes


def build(runs: list[StoredRun], summary: SuiteSummary, argv: list[str] | None = None,
          interrupted: bool = False, apps: bool = False, skipped: list[tuple[str, str]] | None = None) -> Report:
    """`compare --suite`: allocator x workload, the throughput ratio to each workload's fastest
    (paired by round) with the peak RSS beside it, and the geometric mean over the workloads
    (suite.summarise computes them)."""
    contenders, names = summary.contenders, summary.workloads
    cols = ["allocator", *names, "geometric mean"]
    rows, failed = [], set()
    for i, who in enumerate(contenders):
        row = [who]
        for j, name in enumerate(names):
            e = summary.entry(who, name)
            if e is None:
                row.append("-")
            elif e.status != "ok":
                row.append(e.status)
                failed.add((i, j + 1))
            else:
                ratio = "-" if e.ratio is None else f"{e.ratio:.2f}x" + ("" if e.resolved else " n.r.")
                rss = f" · {fmt_bytes(e.peak_rss_kb * 1024)}" if e.peak_rss_kb else ""
                row.append(ratio + rss)
        gm = summary.mean(who)
        row.append(f"{gm:.2f}x" if gm else "-")
        rows.append(row)
    what, unit = ("application", "applications") if apps else ("workload", "workloads")
    figure = ("the application's own figure (requests per second for a server, its seconds from start to checked "
              "result for the others), checked by the application's script before it counts," if apps else
              "throughput (region main)")
    notes = [f"Each entry: {figure} relative to the {what}'s fastest allocator, the median of "
             "per-round ratios (1.00x = fastest; n.r. = not resolved beyond the noise threshold), and the median "
             f"peak RSS of the whole process tree. Full report of {'an' if apps else 'a'} {what}: memsleuth show RUN (runs: "
             + ", ".join(f"{r.name} {r.id}" for r in runs) + ")."]
    notes += [f"Skipped {name}: {why}." for name, why in skipped or []]
    machine = machine_lines(runs[0]) if runs else []
    header = [f"{len(runs)} {unit}; {runs[0].spec.rounds if runs else ''}", *machine]
    footer = [f"Interrupted: the table shows the {unit} that finished."] if interrupted else []
    fig = RatioFigure(names, contenders,
                      [[(e.ratio if (e := summary.entry(who, n)) and e.ratio else None) for n in names]
                       for who in contenders],
                      [[bool((e := summary.entry(who, n)) and e.resolved) for n in names] for who in contenders])
    return Report("memsleuth compare --suite", header,
                  [Table("Applications" if apps else "Allocator suite", cols, rows, notes,
                         align_right=set(range(1, len(cols))), failed=failed)],
                  footer, figures=[fig], command=memsleuth_command(argv or []), run=runs[-1] if runs else None)
