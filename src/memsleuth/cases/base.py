"""What a case study is: workloads plus a plan plus the questions it asks of the evidence.

A case declares its parameters and the variants it runs (one program invocation each, with its
environment). `case_plan` turns them into cells, one per variant and allocator, grouped so that
the allocators of one variant run interleaved. After the run, the case reads the stored samples
and returns a `CaseResult`: its question, tables (every figure with its unit) and statements,
each quoting the numbers it rests on. A statement is computed from the measurements, and says
what was seen when the expected effect is absent; nothing is printed because it is expected.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable

from memsleuth.measure.allocators import Allocator
from memsleuth.errors import UsageError
from memsleuth.measure.plan import Cell, Plan, Rounds
from memsleuth.records.documents import with_defaults
from memsleuth.records.stored import StoredCell, StoredRun
from memsleuth.measure.workloads.base import Param, Value, Workload
from memsleuth import stats


@dataclass(frozen=True)
class Variant:
    """One program invocation of a case: how the tables name it, what runs, and its environment."""
    labels: dict[str, str]           # shown in the tables (variant, setup, tunables, ...)
    workload: Workload
    values: dict[str, Value]         # the program's parameters
    env: dict[str, str] = field(default_factory=dict)
    glibc_only: bool = False         # glibc tunables mean nothing to another allocator
    where: bool = False              # explain it: syscall arguments and call sites (runner, measure/where.py)


@dataclass(frozen=True)
class Num:
    """A number in a case table, in the unit it is shown in (None: not measured). `spec` is the
    report's format; JSON carries the value and unit."""
    value: float | None
    unit: str = ""
    spec: str = ",.0f"
    signed: bool = False             # shown with its sign (a change)


@dataclass(frozen=True)
class Seq:
    """Several numbers in one cell, in order (faults per region, RSS before and after)."""
    parts: tuple
    sep: str = " / "


@dataclass(frozen=True)
class Ratio:
    """A paired ratio with its 95% CI (stats.paired_by_round); None: no round in which both ran."""
    estimate: stats.Estimate | None


# A case table's cell is a label or status (str), or a Num, Seq or Ratio.

def ms_of(ns: float | None) -> Num:
    return Num(None if ns is None else ns / 1e6, "ms", ",.2f")


def mib_of(n_bytes: float | None, signed: bool = False) -> Num:
    return Num(None if n_bytes is None else n_bytes / (1 << 20), "MiB", ",.1f", signed)


def percent_of(share: float | None) -> Num:
    return Num(None if share is None else 100 * share, "%", ".1f")


def cell_json(c):
    """A cell as JSON: a label as text, a number with its unit, a ratio with its CI."""
    if isinstance(c, Num):
        return {"value": c.value, "unit": c.unit} if c.unit else c.value
    if isinstance(c, Seq):
        return [cell_json(x) for x in c.parts]
    if isinstance(c, Ratio):
        e = c.estimate
        return None if e is None else {"median": e.median, "low": e.low, "high": e.high, "n": e.n}
    return c


@dataclass
class CaseTable:
    title: str
    columns: list[str]               # each names its unit
    rows: list[list]                 # Cells: numbers stay numbers until a report formats them
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"title": self.title, "columns": self.columns, "rows": [[cell_json(c) for c in r] for r in self.rows],
                "notes": self.notes}


@dataclass
class CaseFigure:
    """A case's result as a plot: one row per label, each a median over runs with its 95% CI
    (low/high None: too few runs), in one unit."""
    title: str
    unit: str
    rows: list[tuple[str, float, float | None, float | None]]
    higher_is_better: bool = True


def result_rows(items) -> list[tuple[str, float, float | None, float | None]]:
    """(label, per-run values) pairs as figure rows: the median and its CI of each."""
    out = []
    for label, values in items:
        vals = list(values.values()) if isinstance(values, dict) else list(values)
        if vals:
            e = stats.median_ci(vals)
            out.append((label, e.median, e.low, e.high))
    return out


@dataclass
class CaseResult:
    question: str
    tables: list[CaseTable]
    statements: list[str]            # what the evidence shows, each with its numbers
    figures: list[CaseFigure] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"question": self.question, "tables": [t.to_dict() for t in self.tables],
                "statements": self.statements}


class Case(ABC):
    name: str = ""
    seed: str = ""                   # the field report it reproduces
    summary: str = ""                # one line for `case --list`
    question: str = ""
    params: tuple[Param, ...] = ()
    default_allocators: tuple[str, ...] | None = ("glibc",)   # None: every allocator found
    default_reps: int = 3
    warmup: int = 0

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.params)
        raise UsageError(f"case {self.name}: unknown parameter {name!r}: its parameters are {known}")

    def parse_params(self, options: list[str]) -> dict[str, Value]:
        """--param KEY=VALUE (repeatable) over the defaults. A list parameter takes V1,V2 as one value."""
        values = {p.name: p.default for p in self.params}
        seen: set[str] = set()
        for opt in options:
            key, sep, text = (s.strip() for s in opt.partition("="))
            if not sep or not key:
                raise UsageError(f"bad --param {opt!r}: expected KEY=VALUE")
            p = self.param(key)
            if key in seen:
                raise UsageError(f"--param {key} given twice")
            seen.add(key)
            values[key] = p.parse(text, f"case {self.name}")
        self.validate(values)
        return values

    def validate(self, values: dict[str, Value]) -> None:
        """Cross-parameter checks; raise UsageError."""

    def prepare(self, values: dict[str, Value]) -> dict:
        """Facts gathered before planning (stored in the run's spec), like CPU features."""
        return {}

    @abstractmethod
    def variants(self, values: dict[str, Value], facts: dict) -> list[Variant]:
        """The program invocations to run (each under every allocator, unless glibc-only)."""

    @abstractmethod
    def analyse(self, run: StoredRun) -> CaseResult:
        """The question, the tables and the statements, from the stored samples."""


# A glibc tunable setting as the cases sweep it: the label the tables show, and the
# GLIBC_TUNABLES value; None is glibc's defaults (and runs under every allocator).
Tunable = tuple[str, str] | None


def tunable_variant(labels: dict[str, str], tunable: Tunable, workload: Workload,
                    values: dict[str, Value], where: bool = False) -> Variant:
    """A variant under a glibc tunable setting: labelled with it, glibc-only unless it is the default."""
    label, env = tunable or ("default", None)
    return Variant({"tunables": label, **labels}, workload, values, {"GLIBC_TUNABLES": env} if env else {},
                   glibc_only=env is not None, where=where)


def case_plan(case: Case, variants: list[Variant], allocators: list[Allocator], *, reps: int,
              timeout_s: float | None, mem_limit_bytes: int | None) -> Plan:
    cells = []
    for v in variants:
        for alloc in allocators:
            if v.glibc_only and alloc.name != "glibc":
                continue
            values = {k: x for k, x in v.values.items() if x is not None}
            cells.append(Cell(alloc, {**values, **v.labels}, tuple(v.workload.argv(values)), dict(v.env),
                              oom_exit_code=v.workload.oom_exit_code, where=v.where,
                              heap=v.workload.heap))
    if not cells:
        raise UsageError(f"case {case.name}: nothing to run with these allocators and parameters")
    swept = tuple(dict.fromkeys(k for v in variants for k in v.labels))
    return Plan("case", case.name, tuple(cells), swept, Rounds.fixed(reps), case.warmup, timeout_s, mem_limit_bytes)


# ---- reading the stored evidence ---------------------------------------------------------------
# Cases read a cell through the analysis layer's CellView (analysis.cell_view): its medians, its
# typical step (findings.view.steps_of) and its regions, the same numbers the findings read.

# Paired ratios inside a case are called only when their whole CI lies beyond +-2%: a case
# compares a few rounds of long runs, where 1% (compare's default) is below what a handful of
# rounds resolves on a noisy machine.
CASE_NOISE = 0.02


def params_of(params: dict, defaults: dict) -> dict:
    """A cell's (or a run's) parameters as a case's analysis reads them: over `defaults`, what it
    takes where a stored run lacks one (an older run, a variant that does not set it)."""
    return with_defaults(params, defaults)


def status_text(cell: StoredCell) -> str:
    """'ok', or what went wrong: the failures are results too."""
    from memsleuth.analysis.summary import failure_label
    bad = [s for _, w, s in cell.samples if not s.ok]
    good = [s for _, s in cell.measured() if s.ok]
    if not bad:
        return "ok"
    labels = sorted({failure_label(s) for s in bad})
    return ("partly " if good else "") + "/".join(labels)


# ---- figures with their CIs: every figure a case states is a median over runs with its 95% CI,
# or a ratio paired by round with its CI, or says it is a single measurement.

def per_run(cell: StoredCell, get: Callable) -> dict[int, float]:
    """One value per measured ok run of a cell, by round."""
    return {r: float(v) for r, s in cell.measured() if s.ok and (v := get(s)) is not None}


def _ci_suffix(e: stats.Estimate, show) -> str:
    if e.low is None or e.high is None:
        return f" ({'a single measurement' if e.n == 1 else f'{e.n} runs'}: no 95% CI)"
    return f" [{show(e.low)}, {show(e.high)}]"


def median_text(values, show: Callable[[float], str]) -> str:
    """'2.39 GB/s [2.30 GB/s, 2.45 GB/s]', or the median and why it has no CI."""
    vals = list(values.values()) if isinstance(values, dict) else list(values)
    if not vals:
        return "n/a"
    e = stats.median_ci(vals)
    return show(e.median) + _ci_suffix(e, show)


def paired(a: StoredCell, b: StoredCell, get: Callable) -> stats.Estimate | None:
    """a's value over b's, per round, paired: the median ratio with its 95% CI."""
    return stats.paired_by_round(per_run(a, get), per_run(b, get))


def ratio_text(e: stats.Estimate | None) -> str:
    if e is None:
        return "n/a (no round in which both ran)"
    return f"{e.median:.2f}x" + _ci_suffix(e, lambda v: f"{v:.2f}")


def resolved_above(e: stats.Estimate | None, bound: float) -> bool | None:
    """Whether the ratio's whole CI lies above `bound` (True), below it (False), or neither / no
    CI (None): a case calls a difference only when its CI does."""
    if e is None or e.low is None or e.high is None:
        return None
    return True if e.low > bound else False if e.high < bound else None
