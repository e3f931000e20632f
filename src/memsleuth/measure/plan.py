"""A spec (what the user asked for) expanded into cells: allocator x parameter values."""
from __future__ import annotations

import dataclasses
import itertools
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from memsleuth.measure.allocators import Allocator
from memsleuth.errors import UsageError
from memsleuth.records.model import VARIANT_KEY, cell_label
from memsleuth.measure.workloads import Workload
from memsleuth.measure.workloads.base import Value

if TYPE_CHECKING:
    from memsleuth.records.evidence import Sample


@dataclass(frozen=True)
class Cell:
    allocator: Allocator
    params: dict[str, Value]         # workload parameters (cases add labels); empty for a command
    command: tuple[str, ...]         # argv of the measured program (without ms-run)
    env: dict[str, str] = field(default_factory=dict)
    oom_exit_code: int | None = None
    where: bool = False              # explain this cell (syscall arguments, call sites) whatever the plan says
    heap: bool = False               # account its heap in the explaining run whatever it holds (its figures
                                     # come from the heap accounting: heap.py)
    stdin: str | None = None         # a file each run reads from its start as its standard input (else /dev/null)

    @property
    def label(self) -> str:
        return cell_label(self.allocator.name, self.params)


# How long the user's --metric expression may take on one run's output.
METRIC_TIMEOUT_S = 2.0


class MetricTimeout(Exception):
    """A --metric expression that did not finish within METRIC_TIMEOUT_S on a run's output."""


@dataclass(frozen=True)
class MetricSpec:
    """compare --metric NAME=REGEX[:higher|lower]: the figure a benchmark prints, as the cell's metric."""
    name: str
    regex: str
    higher_is_better: bool = True

    @classmethod
    def parse(cls, text: str) -> "MetricSpec":
        name, sep, rest = text.partition("=")
        if not sep or not name.strip() or not rest:
            raise UsageError(f"bad --metric {text!r}: expected NAME=REGEX[:higher|lower], like "
                             "'throughput=([0-9.]+) ops/s:higher'")
        higher = True
        for suffix, value in ((":higher", True), (":lower", False)):
            if rest.endswith(suffix):
                rest, higher = rest[: -len(suffix)], value
        try:
            pattern = re.compile(rest)
        except re.error as e:
            raise UsageError(f"bad --metric {text!r}: the regular expression does not compile ({e})") from None
        if pattern.groups < 1:
            raise UsageError(f"bad --metric {text!r}: the regular expression needs a group around the number, "
                             "like 'time: ([0-9.]+)'")
        return cls(name.strip(), rest, higher)

    def read(self, output: str) -> float | None:
        """The last match's first group as a finite number, or None. The user's expression runs
        with a time bound (the `regex` module's timeout): a pattern that backtracks without end on
        some output, like '(a+)+$', ends in a recorded error, not a hang."""
        import math
        import regex
        found = None
        try:
            for m in regex.finditer(self.regex, output, timeout=METRIC_TIMEOUT_S):
                try:
                    value = float(m.group(1).replace(",", ""))
                except (TypeError, ValueError, IndexError):
                    continue
                if math.isfinite(value):
                    found = value
        except TimeoutError:
            raise MetricTimeout(f"--metric {self.name}: the regular expression ran over {METRIC_TIMEOUT_S:g} s on "
                                "the program's output (catastrophic backtracking?)") from None
        return found

    def to_dict(self) -> dict:
        return {"name": self.name, "regex": self.regex, "higher": self.higher_is_better}


@dataclass(frozen=True)
class EnvVariant:
    """compare --variant NAME:KEY=VALUE[,KEY=VALUE...]: an environment every allocator it applies
    to runs under, interleaved like the allocators themselves."""
    name: str
    env: dict[str, str]

    @classmethod
    def parse(cls, text: str) -> "EnvVariant":
        name, sep, rest = text.partition(":")
        if not sep or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,31}", name or "") or not rest:
            raise UsageError(f"bad --variant {text!r}: expected NAME:KEY=VALUE[,KEY=VALUE...] with NAME of letters, "
                             "digits, '.', '_' or '-', like arena1:GLIBC_TUNABLES=glibc.malloc.arena_max=1")
        if name == "default":
            raise UsageError("--variant default is the allocators' own settings, run anyway: give another name")
        # A comma starts a new setting only before KEY=, so MALLOC_CONF=a:1,b:2 stays one value.
        return cls(name, parse_env_options(re.split(r",(?=[A-Za-z_][A-Za-z0-9_]*=)", rest)))

    def applies_to(self, allocator: str) -> bool:
        """A setting read by one allocator only (GLIBC_TUNABLES, MALLOC_CONF, MIMALLOC_*, TCMALLOC_*)
        means nothing to the others."""
        for key in self.env:
            owner = variant_owner(key)
            if owner is not None and owner != allocator:
                return False
        return True


def variant_owner(key: str) -> str | None:
    if key == "GLIBC_TUNABLES" or key.startswith("MALLOC_ARENA_") or key.startswith("MALLOC_TOP_PAD") or \
            key.startswith("MALLOC_TRIM_") or key.startswith("MALLOC_MMAP_"):
        return "glibc"
    if key in ("MALLOC_CONF", "JE_MALLOC_CONF"):
        return "jemalloc"
    if key.startswith("MIMALLOC_"):
        return "mimalloc"
    if key.startswith("TCMALLOC_"):
        return "tcmalloc"
    return None


def with_variants(cells: list[Cell], variants: list[EnvVariant]) -> tuple[list[Cell], list[dict]]:
    """Each cell under its own settings ("default") and under every variant that applies to its
    allocator; and, per variant, the allocators it was skipped for."""
    if not variants:
        return cells, []
    out = []
    for c in cells:
        out.append(dataclasses.replace(c, params={**c.params, VARIANT_KEY: "default"}, env=dict(c.env)))
        for v in variants:
            if v.applies_to(c.allocator.name):
                out.append(dataclasses.replace(c, params={**c.params, VARIANT_KEY: v.name}, env={**c.env, **v.env}))
    names = list(dict.fromkeys(c.allocator.name for c in cells))
    report = [{"name": v.name, "env": v.env, "skipped": [a for a in names if not v.applies_to(a)]} for v in variants]
    return out, report


@dataclass(frozen=True)
class Rounds:
    """How many interleaved rounds: fixed (--reps), or adaptive until each CI meets a target."""
    min_reps: int
    max_reps: int
    target_ci: float | None          # relative CI half-width to reach; None: run exactly max_reps

    @classmethod
    def fixed(cls, reps: int) -> "Rounds":
        return cls(reps, reps, None)

    def describe(self) -> str:
        if self.target_ci is None:
            return f"{self.max_reps} interleaved rounds"
        return (f"adaptive: rounds until every CI half-width <= {self.target_ci:.1%} "
                f"({self.min_reps}..{self.max_reps} rounds)")


@dataclass(frozen=True)
class Plan:
    kind: str                        # "workload" or "command"
    name: str                        # the workload's name, or the command's program
    cells: tuple[Cell, ...]
    swept: tuple[str, ...]           # the parameters that vary across cells
    rounds: "Rounds"
    warmup: int
    timeout_s: float | None
    mem_limit_bytes: int | None
    syscall_args: bool = False       # record munmap/madvise/mmap/mremap/brk arguments (ms-run --syscall-args)
    where: bool = False              # one more run per cell under perf for call sites (measure/where.py)
    explain_if_needed: bool = False  # check: the explaining runs only when the measured runs show a candidate
    heap: bool = False               # account the heap in the explaining run (heap.py) of a cell that holds memory
    metric: MetricSpec | None = None # the benchmark's own figure (compare --metric)
    reference: Cell | None = None    # run once in every round, for diff to divide by (reference_cell)
    # When set, decides after each round (from rounds.min_reps on) whether the session has what
    # it needs, from every cell's ok measured runs by round; it replaces the per-cell CI target
    # (gate: until the paired time verdict is resolved, gate.resolved).
    settled: Callable[[list[dict[int, Sample]]], bool] | None = None
    # The measured rounds count the syscalls by name too (gate, --try: their count verdicts pair the
    # rounds). Else, with a warm-up, the rounds count none (ms-run --no-syscalls: while a syscall
    # tracepoint is registered each call costs ~80 ns more, a counted one ~260 ns more; perf stat on
    # 3 M small madvise calls of ~400 ns) and the warm-ups count them for all (with_counts).
    rounds_count: bool = False

    @property
    def quiet_rounds(self) -> bool:
        """Whether the measured rounds are timed without counting a syscall by name."""
        return self.warmup > 0 and not self.rounds_count

    def label(self, i: int) -> str:
        """A cell as progress and reports name it: its allocator and the swept parameters."""
        c = self.cells[i]
        return cell_label(c.allocator.name, c.params, self.swept)

    def groups(self) -> list[tuple[tuple[int, ...], list[int]]]:
        """Cells grouped by parameter values: each group is the set of allocators compared."""
        order: dict[tuple[int, ...], list[int]] = {}
        for i, c in enumerate(self.cells):
            order.setdefault(tuple(c.params[k] for k in self.swept), []).append(i)
        return list(order.items())


# The reference: a small, CPU-bound allocator loop under glibc, the same in every run of every
# version of memsleuth. Run once per round, it measures how fast the machine is at that moment, so
# `diff` can divide a shift of the whole machine between two runs out of their cells (regression.py).
REFERENCE_WORKLOAD = "random-mixed"
REFERENCE_PARAMS = {"iterations": 300_000, "ws": 400, "latency-every": 0, "harness-ops": 0}
REFERENCE_LABEL = "reference: random-mixed ws=400 under glibc"


def reference_cell() -> Cell:
    from memsleuth.measure import allocators, workloads
    w = workloads.get(REFERENCE_WORKLOAD)
    values = {k: v for k, v in w.defaults().items() if v is not None}
    values.update(REFERENCE_PARAMS)
    return Cell(allocators.glibc(), {"reference": REFERENCE_LABEL}, tuple(w.argv(values)), {})


def parse_param_options(workload: Workload, options: list[str]) -> dict[str, list[Value]]:
    """--param KEY=V1,V2 (repeatable) -> {KEY: [V1, V2]}, validated against the schema."""
    sweep: dict[str, list[int]] = {}
    for opt in options:
        if "=" not in opt:
            raise UsageError(f"bad --param {opt!r}: expected KEY=V1,V2,...")
        key, values = (s.strip() for s in opt.split("=", 1))
        p = workload.param(key)
        items = [values] if p.takes_list else [v for v in values.split(",") if v.strip()]
        if not items:
            raise UsageError(f"bad --param {opt!r}: no values")
        if len(items) > 1 and not p.sweepable:
            raise UsageError(f"{workload.name}: parameter {key} cannot be swept")
        if key in sweep:
            raise UsageError(f"--param {key} given twice")
        parsed = [p.parse(v, workload.name) for v in items]
        _no_repeats(key, items, parsed)
        sweep[key] = parsed
    return sweep


def _no_repeats(key: str, items: list[str], parsed: list) -> None:
    """The same value twice (ws=400,400, or 1k,1000) would compare two identical cells."""
    seen: dict = {}
    for text, value in zip(items, parsed):
        k = repr(value)
        if k in seen:
            raise UsageError(f"--param {key}: {seen[k]!r} and {text!r} are the same value: each value once")
        seen[k] = text


def workload_plan(workload: Workload, allocators: list[Allocator], param_options: list[str], *, rounds: Rounds,
                  warmup: int = 1, timeout_s: float | None, mem_limit_bytes: int | None,
                  env: dict[str, str] | None = None) -> Plan:
    sweep = {k: list(v) for k, v in workload.default_sweep.items()}
    sweep.update(parse_param_options(workload, param_options))
    base = {k: v for k, v in workload.defaults().items() if v is not None}
    keys = [k for k in (p.name for p in workload.params) if k in sweep]
    cells = []
    for combo in itertools.product(*(sweep[k] for k in keys)):
        values = dict(base)
        values.update(zip(keys, combo))
        if workload.validate:
            workload.validate(values)
        for alloc in allocators:
            cells.append(Cell(alloc, values, tuple(workload.argv(values)), dict(env or {}),
                              oom_exit_code=workload.oom_exit_code, heap=workload.heap))
    swept = tuple(k for k in keys if len(sweep[k]) > 1) or tuple(keys)
    return Plan("workload", workload.name, tuple(cells), swept, rounds, warmup, timeout_s, mem_limit_bytes)


def command_plan(command: list[str], allocators: list[Allocator], *, rounds: Rounds, warmup: int = 1,
                 timeout_s: float | None, mem_limit_bytes: int | None, env: dict[str, str] | None = None,
                 param_options: list[str] | None = None, stdin: str | None = None) -> Plan:
    """Cells of a command: each allocator, under each combination of --param values, which fill
    the command's {name} placeholders; `stdin`, the file each run reads as its standard input."""
    sweep = parse_command_params(command, param_options or [])
    keys = list(sweep)
    cells = []
    for combo in itertools.product(*(sweep[k] for k in keys)):
        values = dict(zip(keys, combo))
        argv = tuple(_fill(arg, values) for arg in command)
        cells += [Cell(a, values, argv, dict(env or {}), stdin=stdin) for a in allocators]
    swept = tuple(k for k in keys if len(sweep[k]) > 1)
    return Plan("command", command[0], tuple(cells), swept, rounds, warmup, timeout_s, mem_limit_bytes)


def _fill(arg: str, values: dict[str, str]) -> str:
    for k, v in values.items():
        arg = arg.replace("{" + k + "}", v)
    return arg


def parse_command_params(command: list[str], options: list[str]) -> dict[str, list[str]]:
    """--param KEY=V1,V2 for a command: each KEY must appear as {KEY} in the command."""
    sweep: dict[str, list[str]] = {}
    for opt in options:
        key, sep, values = (s.strip() for s in opt.partition("="))
        if not sep or not key or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", key):
            raise UsageError(f"bad --param {opt!r}: expected KEY=V1,V2,... with KEY a name")
        if key in sweep:
            raise UsageError(f"--param {key} given twice")
        items = [v.strip() for v in values.split(",") if v.strip()]
        if not items:
            raise UsageError(f"bad --param {opt!r}: no values")
        if not any("{" + key + "}" in arg for arg in command):
            raise UsageError(f"--param {key} is not used in the command: put {{{key}}} where its value goes, "
                             f"like -- ./bench --threads {{{key}}}")
        _no_repeats(key, items, items)
        sweep[key] = items
    return sweep


def parse_env_options(options: list[str]) -> dict[str, str]:
    """--env KEY=VALUE (repeatable) for the measured processes: tunables, allocator options."""
    env: dict[str, str] = {}
    for opt in options:
        key, sep, value = opt.partition("=")
        if not sep or not key or not key.replace("_", "").isalnum() or key[0].isdigit():
            raise UsageError(f"bad --env {opt!r}: expected KEY=VALUE with KEY a variable name")
        if key in ("LD_PRELOAD", "MEMSLEUTH_FD"):
            raise UsageError(f"--env {key} is set by memsleuth itself (use --alloc for preloads)")
        if key in env:
            raise UsageError(f"--env {key} given twice")
        if key == "GLIBC_TUNABLES":
            from memsleuth.measure import tunables
            tunables.validate(value)
        env[key] = value
    return env
