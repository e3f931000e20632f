"""The report as data: titled tables of already-formatted strings, figures' numbers, notes.

Every format (terminal, Markdown, HTML, the exports) renders the same `Report`, so no two formats
disagree on a number. The builders that fill it are in `report/builders/`, one per report kind.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from memsleuth.records.stored import StoredRun


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
class FlameFigure:
    """A stack set as a flame graph (stacks.merge's tree): what it counts, in what unit."""
    title: str
    unit: str                                      # "count", "bytes", "nanoseconds"
    root: object                                   # stacks.Node
    caption: str = ""


@dataclass
class Report:
    title: str
    header: list[str]
    tables: list[Table]
    footer: list[str] = field(default_factory=list)
    findings: list = field(default_factory=list)   # memsleuth.findings.Finding, rendered as blocks
    # the findings' subject not worth naming before each (check's one cell: its allocator's label, which
    # a program's own mechanism, or a static Go binary's, would otherwise be headed by)
    own_subject: str = ""
    quiet: str | None = None                       # no mechanism finding: the one line that says what was found
    answer: list[str] = field(default_factory=list)   # the answer in one to three lines, first after the title
    footer_alert: bool = False                     # the footer reports a problem (a regression): red, not neutral
    question: str | None = None                    # a case study's question, shown before the tables
    statements: list[str] = field(default_factory=list)   # a case's "what the evidence shows"
    figures: list = field(default_factory=list)    # ThroughputFigure, RatioFigure, TimelineFigure, ChangeFigure
    # figures made only where a format draws them (the flame graphs: 0.16 s of a node check's report
    # under cProfile, for a terminal that shows none)
    later_figures: Callable[[], list] | None = field(default=None, repr=False)
    command: str = ""                              # the memsleuth command line, shell-quoted
    run: StoredRun | None = None                   # the stored run it shows: the records csv and pyperf export
    analysis: object | None = None                 # what analysis computed from it, once (the JSON export's numbers)
    timings: dict = field(default_factory=dict)    # seconds this process spent on it: analysis and report, drawing
