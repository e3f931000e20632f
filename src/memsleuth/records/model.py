"""The typed records that cross layers: what the store saves and loads, and everything else reads
as attributes. Each has `to_dict` (what is stored, JSON) and `from_dict`, which accepts what any
earlier version stored: missing fields take their defaults, unknown ones are kept in `extra`.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


class Counts(dict):
    """Counts by name (calls of each syscall, samples of each kernel path): a name never counted
    reads 0. `name in counts` still tells whether it was counted at all."""

    def __missing__(self, key) -> int:
        return 0


class Readings(dict):
    """Readings by name (perf counters, a case's evidence by cell): a reading not taken (an event
    that did not open or was never scheduled, a cell not run) reads None."""

    def __missing__(self, key) -> None:
        return None


class Record:
    """to_dict/from_dict for a dataclass; nested records and lists of them are declared in NESTED."""
    NESTED: dict[str, type] = {}

    def to_dict(self) -> dict:
        out: dict[str, Any] = {}
        for f in fields(self):  # type: ignore[arg-type]
            if f.name == "extra":
                continue
            v = getattr(self, f.name)
            if isinstance(v, Record):
                v = v.to_dict()
            elif isinstance(v, list) and v and isinstance(v[0], Record):
                v = [x.to_dict() for x in v]
            out[f.name] = v
        return {**getattr(self, "extra", {}), **out}

    @classmethod
    def from_dict(cls, d: dict | None):
        d = dict(d or {})
        names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        kw: dict[str, Any] = {}
        for k, v in d.items():
            if k not in names or k == "extra":
                continue
            sub = cls.NESTED.get(k)
            if sub is not None:
                v = [sub.from_dict(x) for x in v] if isinstance(v, list) else sub.from_dict(v)
            kw[k] = v
        obj = cls(**kw)
        if "extra" in names:
            obj.extra = {k: v for k, v in d.items() if k not in names}
        return obj


@dataclass
class AllocatorInfo(Record):
    """An allocator as a run used it."""
    name: str = "?"
    path: str | None = None          # the preloaded library (or libc for glibc)
    version: str = "unknown"
    source: str = "system"           # system, distribution, user or program (its own, not preloaded by memsleuth)
    preloaded: bool = False
    extra: dict = field(default_factory=dict, compare=False)


@dataclass
class MachineInfo(Record):
    """The machine a run was made on: numbers are only comparable on the same one."""
    hostname: str | None = None
    label: str | None = None         # --machine-label (a fleet task: its partition), else None
    cpu_model: str | None = None
    cpus: int | None = None
    kernel: str | None = None
    arch: str | None = None
    glibc: str | None = None
    thp: str | None = None
    governor: str | None = None
    mem_total_kb: int | None = None
    page_bytes: int | None = None    # measured (sysconf), not assumed
    loadavg_1m: float | None = None
    loadavg_1m_end: float | None = None
    python: str | None = None
    cpu_flags: list[str] = field(default_factory=list)   # the flags that matter to memory (machine.MEMORY_FLAGS)
    numa_nodes: int | None = None
    allocators: list[AllocatorInfo] = field(default_factory=list)
    # ns per kernel entry of each kind, measured by ms-calibrate when the run began (analysis/cost.py)
    unit_costs: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict, compare=False)
    NESTED = {"allocators": AllocatorInfo}

    @property
    def name(self) -> str:
        """How reports name the machine: its label, else its host name."""
        return str(self.label or self.hostname or "unknown")   # a damaged store may hold a number


@dataclass
class RunSpec(Record):
    """What was asked for: rounds, limits, environment, the swept parameters, a case's inputs."""
    rounds: str = ""                 # described for people ("adaptive: ...", "5 interleaved rounds")
    reps: int | None = None          # fixed rounds (cases)
    min_reps: int | None = None
    max_reps: int | None = None
    target_ci: float | None = None
    noise: float = 0.01              # stats.DEFAULT_NOISE (not imported: the model has no dependencies)
    env: dict[str, str] = field(default_factory=dict)
    warmup: int = 1
    swept: list[str] = field(default_factory=list)
    timeout_s: float | None = None
    mem_limit_bytes: int | None = None
    command: list[str] | None = None
    interleaving: str = "rounds, rotated order"
    metric: dict | None = None       # compare --metric: {"name", "regex", "higher"}
    variants: list = field(default_factory=list)   # compare --variant: [{"name", "env", "skipped"}]
    case: str | None = None
    case_params: dict = field(default_factory=dict)
    facts: dict = field(default_factory=dict)
    gate: dict | None = None         # gate: {"time", "threshold", "count_threshold"}
    extra: dict = field(default_factory=dict, compare=False)


# A cell's environment variant (compare --variant) is kept in its params under this key; it is
# part of what is compared (shown with the allocator: `glibc+arena1`), never a swept parameter.
VARIANT_KEY = "variant"


def contender(allocator: str, params: dict) -> str:
    """What a cell is in a comparison: its allocator, with its variant when it has one."""
    v = params.get(VARIANT_KEY)
    return f"{allocator}+{v}" if v and v != "default" else allocator


def cell_label(allocator: str, params: dict, keys=None) -> str:
    """How a cell is named everywhere: its allocator, then its parameters (only `keys`, in that
    order, when given: the swept ones), like `mimalloc [ws=400]`."""
    shown = ", ".join(f"{k}={params[k]}" for k in (params if keys is None else keys)
                      if k in params and k != VARIANT_KEY)
    return contender(allocator, params) + (f" [{shown}]" if shown else "")
