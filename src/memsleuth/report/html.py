"""The report as one self-contained HTML file: jinja2 for the page, matplotlib for the plots
(inline SVG, text kept as text), no script, no external URL, nothing that leaves the file (a
Content-Security-Policy says so to the browser). Every piece of user text goes through jinja2's
autoescaping; the SVGs come from matplotlib, which escapes the text it draws. Formatting only:
every number comes from the report (report/content.py), filled by its builder."""
from __future__ import annotations

import io
import re
from dataclasses import dataclass

from memsleuth import __version__
from memsleuth.report.content import (
    ChangeFigure,
    CompositionFigure,
    FlameFigure,
    RatioFigure,
    Report,
    ResultFigure,
    ThroughputFigure,
    TimelineFigure,
    TrendFigure,
)
from memsleuth.report.wording import who_text


@dataclass
class Drawn:
    id: str
    svg: str
    caption: str
    wide: bool          # a full-width figure above the tables; else a small multiple below them
    section: str = "timeline"   # which group of small multiples it is drawn in (SECTIONS)


# The groups of small multiples below the tables: a heading and a note each.
SECTIONS = {
    "timeline": ("Memory over time", "Resident memory of the process tree in every run (the median run dark, the "
                 "others faint), and beneath it the median run's page-fault and system-call rates, from ms-run's "
                 "timeline."),
    "trend": ("Series over the stored runs", "Each cell's metric in every stored run: the median with its 95% CI, "
              "and a dashed line before the first run of each step."),
}


def render(report: Report) -> str:
    import jinja2
    env = jinja2.Environment(loader=jinja2.PackageLoader("memsleuth.report", "templates"),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True)
    # Small multiples of memory over time share their axes, so that panels compare at a glance.
    every = report.figures + (report.later_figures() if report.later_figures else [])
    lines = [f for f in every if isinstance(f, TimelineFigure)]
    limits = ((max(t[-1] for f in lines for t, _ in f.runs if t), max(v for f in lines for _, r in f.runs for v in r))
              if lines else None)
    figures = [d for i, f in enumerate(every) if (d := draw(f, i, limits)) is not None]
    sections = [(SECTIONS[name], [d for d in figures if not d.wide and d.section == name]) for name in SECTIONS]
    flames = [d for d in figures if d.section == "flame"]
    return env.get_template("report.html.j2").render(report=report, figures=figures, who=who_text,
                                                     version=__version__, sections=[s for s in sections if s[1]],
                                                     flames=flames)


def draw(fig, i: int, limits: tuple[float, float] | None = None) -> Drawn | None:
    """One figure as inline SVG; `limits`: the (seconds, MiB) every memory-over-time panel shares."""
    if isinstance(fig, FlameFigure):   # drawn as SVG directly: a box per function, no plotting library
        from memsleuth.report import flame
        return Drawn(f"figure-{i}", flame.svg(fig.root, fig.title, fig.unit), fig.caption, False, "flame")
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    # Labels are user text (parameter values, allocator names): never parsed as mathtext/TeX.
    plt.rcParams.update({"svg.fonttype": "none", "font.size": 9, "axes.spines.top": False,
                         "axes.spines.right": False, "text.parse_math": False, "text.usetex": False})
    if isinstance(fig, ThroughputFigure):
        varies = "across the swept parameter" if len(fig.groups) > 1 else "for the one parameter set"
        out = _throughput(plt, fig), f"Per allocator, the median with its 95% CI {varies}.", True
    elif isinstance(fig, RatioFigure):
        out = _ratio(plt, fig), fig.caption or ("Paired ratio to each group's fastest (1.00 = fastest); cells marked "
                                                "n.r. are differences the runs did not resolve."), True
    elif isinstance(fig, TimelineFigure):
        out = _timeline(plt, fig, limits), fig.label, False
    elif isinstance(fig, ChangeFigure):
        out = _change(plt, fig), "B's time over A's per cell, with its 95% CI; the band is the threshold.", True
    elif isinstance(fig, ResultFigure):
        ci = any(r[2] is not None for r in fig.rows)
        out = _result(plt, fig), (f"{fig.title}: the median over runs" + (" with its 95% CI" if ci else
                                  " (too few runs for a CI)") + ("; higher is better." if fig.higher_is_better
                                                                else "; lower is better.")), True
    elif isinstance(fig, CompositionFigure):
        out = _composition(plt, fig), ("What resident memory is made of over the explaining run: the live heap "
                                       "(heap accounting; only up to the anonymous memory, since blocks never touched "
                                       "are not resident), the anonymous memory beyond it, and file-backed memory."), True
    elif isinstance(fig, TrendFigure):
        out = _trend(plt, fig), (f"{fig.cell}: {fig.metric} per stored run (median, 95% CI); dashed: the first run "
                                 "after a step"), False
    else:
        return None
    f, caption, wide = out
    _plain_ticks(f)
    section = "trend" if isinstance(fig, TrendFigure) else "timeline"
    buf = io.StringIO()
    f.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(f)
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]          # drop the XML prolog and doctype: the SVG is inline
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)
    return Drawn(f"figure-{i}", svg, caption, wide, section)


def _throughput(plt, fig: ThroughputFigure):
    f, ax = plt.subplots(figsize=(8, 3.4))
    n = len(fig.series)
    width = 0.8 / max(n, 1)
    for k, (alloc, values) in enumerate(fig.series.items()):
        xs = [g + (k - (n - 1) / 2) * width for g in range(len(fig.groups))]
        pts = [(x, v) for x, v in zip(xs, values) if v is not None]
        if not pts:
            continue
        ax.bar([x for x, _ in pts], [v[0] for _, v in pts], width=width * 0.95, label=alloc,
               yerr=[[v[0] - v[1] for _, v in pts], [v[2] - v[0] for _, v in pts]], capsize=2)
    ax.set_xticks(range(len(fig.groups)), fig.groups, rotation=15 if len(fig.groups) > 4 else 0)
    ax.set_ylabel(fig.metric if "better" in fig.metric else
                  fig.metric + (" — higher is better" if fig.higher_is_better else " — lower is better"))
    # Values with their unit's SI prefix (77.7M, not 1e7 at the axis' top), as the tables write them.
    from matplotlib.ticker import EngFormatter
    unit = "ops/s" if fig.metric.startswith("throughput") else "s" if fig.metric.startswith("wall time") else ""
    ax.yaxis.set_major_formatter(EngFormatter(unit=unit, sep=" "))
    # The legend above the plot, where no error bar can be under it.
    ax.legend(fontsize=8, ncols=min(n, 5), loc="lower left", bbox_to_anchor=(0, 1.02), frameon=False)
    return f


def _ratio(plt, fig: RatioFigure):
    import numpy as np
    data = np.array([[r if r is not None else np.nan for r in row] for row in fig.ratio], dtype=float)
    f, ax = plt.subplots(figsize=(1.6 + 1.1 * len(fig.groups), 0.6 + 0.45 * len(fig.allocators)))
    im = ax.imshow(data, cmap="RdYlGn_r", vmin=1.0, vmax=max(1.5, float(np.nanmax(data)) if np.isfinite(data).any()
                                                                 else 1.5), aspect="auto")
    # Long column names (the suite's workloads, machines) would overlap level: slant them.
    slant = max((len(g) for g in fig.groups), default=0) * 6 > 1.1 * 72
    ax.set_xticks(range(len(fig.groups)), fig.groups, rotation=30 if slant else 0, ha="right" if slant else "center")
    ax.set_yticks(range(len(fig.allocators)), fig.allocators)
    for a in range(len(fig.allocators)):
        for g in range(len(fig.groups)):
            v = fig.ratio[a][g]
            text = "n/a" if v is None else (f"{v:.2f}" + ("" if fig.resolved[a][g] else "\nn.r."))
            ax.text(g, a, text, ha="center", va="center", fontsize=8,
                    color="black" if v is None else _text_on(im.cmap(im.norm(v))))
    f.colorbar(im, ax=ax, label="paired ratio to the group's fastest median (n.r.: not resolved)")
    f.tight_layout()
    return f


def _text_on(rgba) -> str:
    """Black or white, whichever contrasts more with a cell colour (WCAG relative luminance)."""
    def lin(c: float) -> float:
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = rgba[:3]
    lum = 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)
    return "black" if (lum + 0.05) / 0.05 >= 1.05 / (lum + 0.05) else "white"


def _plain_ticks(f) -> None:
    """Log and symlog axes label their ticks in mathtext ($\\mathdefault{10^{5}}$), which the SVG
    would show as it is (mathtext is off: labels are user text): plain numbers instead (100k)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter
    from memsleuth.units import fmt_si
    for ax in f.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() in ("log", "symlog"):
                axis.set_major_formatter(FuncFormatter(lambda v, _pos: fmt_si(v)))
                axis.set_minor_formatter(NullFormatter())


def _timeline(plt, fig: TimelineFigure, limits: tuple[float, float] | None = None):
    rows = 2 if fig.rates else 1
    f, axes = plt.subplots(rows, 1, figsize=(4.6, 2.2 * rows), sharex=True, squeeze=False)
    ax = axes[0][0]
    for k, (t, rss) in enumerate(fig.runs):
        ax.plot(t, rss, color="#0969da", alpha=1.0 if k == fig.median else 0.2,
                linewidth=1.6 if k == fig.median else 0.8)
    ax.set_ylabel("RSS (MiB)")
    if limits and limits[0] > 0 and limits[1] > 0:
        ax.set_xlim(0, limits[0] * 1.02)
        ax.set_ylim(0, limits[1] * 1.05)
    if fig.rates:
        r = axes[1][0]
        for name, (t, per_s) in list(fig.rates.items())[:4]:
            r.plot(t, per_s, label=name, linewidth=1)
        r.set_yscale("symlog")
        r.set_ylabel("per second")
        r.legend(fontsize=7, frameon=False)
    axes[-1][0].set_xlabel("seconds since start")
    return f


def _change(plt, fig: ChangeFigure):
    f, ax = plt.subplots(figsize=(8, 0.8 + 0.35 * len(fig.cells)))
    ys = range(len(fig.cells))
    for y, ch, reg in zip(ys, fig.change, fig.regression):
        if ch is None:
            continue
        med, lo, hi = ch
        # Red means a regression and nothing else; everything else is neutral grey.
        ax.errorbar([med], [y], xerr=[[med - (lo or med)], [(hi or med) - med]], fmt="o",
                    color="#cf222e" if reg else "#57606a", capsize=3)
    ax.axvspan(1 / (1 + fig.threshold), 1 + fig.threshold, color="#d0d7de", alpha=0.5)
    ax.axvline(1.0, color="#57606a", linewidth=0.8)
    ax.set_yticks(list(ys), fig.cells)
    ax.set_xlabel("B / A time (> 1: B slower)")
    return f


def _trend(plt, fig: TrendFigure):
    f, ax = plt.subplots(figsize=(5.5, 2.6))
    top = max(p[1] for p in fig.points)
    if fig.unit == "s":
        scale, unit = next((k, u) for k, u, limit in ((1e9, "ns", 1e-6), (1e6, "us", 1e-3), (1e3, "ms", 10.0),
                                                      (1.0, "s", float("inf"))) if top < limit)
    else:
        scale, unit = {"bytes": (1 / (1 << 20), "MiB")}.get(fig.unit, (1.0, fig.unit))
    xs = list(range(len(fig.points)))
    med = [p[1] * scale for p in fig.points]
    lo = [m - (p[2] * scale if p[2] is not None else m) for m, p in zip(med, fig.points)]
    hi = [(p[3] * scale if p[3] is not None else m) - m for m, p in zip(med, fig.points)]
    ax.errorbar(xs, med, yerr=[lo, hi], fmt="o-", color="#0969da", markersize=3, linewidth=1, capsize=2)
    runs = [p[0] for p in fig.points]
    for r in fig.steps:
        if r in runs:
            ax.axvline(runs.index(r) - 0.5, color="#cf222e", linestyle="--", linewidth=1)
    ax.set_xticks(xs, [str(r) for r in runs], fontsize=7)
    ax.set_xlabel("run")
    ax.set_ylabel(f"{fig.metric} ({unit})")
    ax.set_ylim(bottom=0)
    return f


def _result(plt, fig: ResultFigure):
    f, ax = plt.subplots(figsize=(7, 0.8 + 0.4 * len(fig.rows)))
    ys = list(range(len(fig.rows)))
    for y, (label, med, lo, hi) in zip(ys, fig.rows):
        ax.errorbar([med], [y], xerr=[[med - (lo if lo is not None else med)], [(hi if hi is not None else med) - med]],
                    fmt="o", color="#0969da", capsize=3)
    ax.set_yticks(ys, [r[0] for r in fig.rows])
    ax.invert_yaxis()
    ax.set_xlim(left=0)
    ax.set_xlabel(fig.unit)
    ax.set_title(fig.title, fontsize=9, loc="left")
    return f


def _composition(plt, fig: CompositionFigure):
    f, ax = plt.subplots(figsize=(8, 3))
    ax.stackplot(fig.seconds, fig.live, fig.beyond, fig.file, labels=["live heap", "anonymous beyond the live heap",
                                                                       "file-backed"],
                 colors=["#0969da", "#bf8700", "#8c959f"], alpha=0.85)
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("resident (MiB)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8, ncols=3, loc="lower left", bbox_to_anchor=(0, 1.02), frameon=False)
    return f
