"""What a workload declares: its program, its parameters and how to read its output."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from memsleuth.measure import native
from memsleuth.errors import UsageError
from memsleuth.units import parse_size_bytes


Value = int | str | tuple[str, ...]


@dataclass(frozen=True)
class Param:
    """One parameter of a workload or a case.

    kind: "int" (a count: 1e6, 10M), "size" (bytes with binary suffixes: 4M = 4 MiB), "sizes" and
    "counts" (comma-separated lists of sizes or counts, given as one value), "choice" (one of `choices`) or
    "choices" (a comma-separated subset of `choices`, given as one value).
    """
    name: str
    default: Value | None            # None: the program chooses (and says so in its help)
    minimum: int = 0
    maximum: int = 1 << 62
    help: str = ""
    sweepable: bool = True
    kind: str = "int"
    choices: tuple[str, ...] = ()

    @property
    def takes_list(self) -> bool:
        """A list-valued parameter: its commas belong to its one value, they do not sweep it."""
        return self.kind in ("sizes", "counts", "choices")

    def parse(self, text: str, workload: str) -> Value:
        if self.kind == "choice":
            return self._choice(text.strip(), workload)
        if self.kind == "choices":
            items = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
            if not items:
                raise UsageError(f"{workload}: parameter {self.name} needs at least one of {', '.join(self.choices)}")
            return tuple(self._choice(t, workload) for t in items)
        if self.kind in ("sizes", "counts"):
            items = [t for t in text.split(",") if t.strip()]
            if not items:
                raise UsageError(f"{workload}: parameter {self.name} needs at least one value")
            return ",".join(str(self._number(t, workload)) for t in items)
        return self._number(text, workload)

    def _choice(self, text: str, workload: str) -> str:
        if text not in self.choices:
            raise UsageError(f"{workload}: parameter {self.name} must be one of {', '.join(self.choices)}, got {text!r}")
        return text

    def _number(self, text: str, workload: str) -> int:
        if self.kind in ("size", "sizes"):
            try:
                value = parse_size_bytes(text)
            except UsageError:
                raise UsageError(f"{workload}: parameter {self.name} must be a size like 4096, 64K or 4M, "
                                 f"got {text!r}") from None
        else:
            value = parse_count(text)
            if value is None:
                raise UsageError(f"{workload}: parameter {self.name} must be an integer, got {text!r}")
        if value < self.minimum or value > self.maximum:
            raise UsageError(
                f"{workload}: parameter {self.name} must be in [{self.minimum}, {self.maximum}], got {text!r}"
            )
        return value


_COUNT = re.compile(r"^(-?\d+(?:\.\d+)?(?:e\d+)?)([kmg]?)$", re.IGNORECASE)


def parse_count(text: str) -> int | None:
    """'1000000', '1_000_000', '1e6', '10M', '4k' -> int; None if it is not a whole number."""
    m = _COUNT.match(text.strip().replace("_", ""))
    if not m:
        return None
    value = float(m.group(1)) * {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}[m.group(2).lower()]
    if "." not in m.group(1) and "e" not in m.group(1).lower() and not m.group(2):
        return int(m.group(1))  # exact for integers beyond float precision
    return int(value) if value.is_integer() else None


@dataclass(frozen=True)
class Workload:
    name: str
    program: str                     # file name in the native folder
    params: tuple[Param, ...]
    description: str
    default_sweep: dict[str, tuple[int, ...]] = field(default_factory=dict)
    oom_exit_code: int | None = None
    validate: Callable[[dict[str, Value]], None] | None = None
    # An allocator workload (docs/workloads.md): it samples latency and measures its harness in
    # region "harness"; `suite` holds the parameters `compare --suite` runs it with.
    suite: dict[str, Value] | None = None
    # Its figures come from the heap accounting (heap.py): every cell gets an explaining run with it.
    heap: bool = False

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.params)
        raise UsageError(f"{self.name}: unknown parameter {name!r}: its parameters are {known}")

    def defaults(self) -> dict[str, Value | None]:
        return {p.name: p.default for p in self.params}

    def argv(self, values: dict[str, Value | None]) -> list[str]:
        return [str(native.native_path(self.program))] + [f"--{k}={v}" for k, v in values.items() if v is not None]


# The default sampling rate (native/workloads/ms_wl.h WL_LATENCY_EVERY): 1 in 64 cost 7% of
# random-mixed's operations (bench/latency_cost.py), 1 in 256 about 2%.
LATENCY_EVERY = 256


def sampling_params(every: int = LATENCY_EVERY) -> tuple[Param, ...]:
    """The parameters every allocator workload shares: latency sampling and the harness phase."""
    return (
        Param("latency-every", every, 0, 1 << 30, "time a random 1 in N allocator calls (0: none)"),
        Param("harness-ops", None, 0, 1 << 40, "operations of the harness phase, per thread (default a quarter "
                                                "of main's; 0: none)"),
    )


# The random seed every randomised workload takes.
SEED = Param("seed", 1, 0, (1 << 63) - 1, "random seed")


def size_range(smallest: int, largest: int, floor: int = 16, ceiling: int = 1 << 30, what: str = "block, bytes",
               spread: str = "", kind: str = "size") -> tuple[Param, Param]:
    """min-size and max-size: the sizes a workload draws from (checked in order by size_order)."""
    return (Param("min-size", smallest, floor, ceiling, f"smallest {what}", kind=kind),
            Param("max-size", largest, floor, ceiling, f"largest {what}" + (f" ({spread})" if spread else ""), kind=kind))


def size_order(name: str, lo: str = "min-size", hi: str = "max-size") -> Callable[[dict[str, Value]], None]:
    """A validator: parameter lo must not exceed hi."""
    def check(values: dict[str, Value]) -> None:
        if values.get(lo) is not None and values.get(hi) is not None and values[lo] > values[hi]:
            raise UsageError(f"{name}: {lo} ({values[lo]}) must not exceed {hi} ({values[hi]})")
    return check
