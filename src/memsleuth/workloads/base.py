"""What a workload declares: its program, its parameters and how to read its output."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Callable

from memsleuth import native
from memsleuth.errors import UsageError


@dataclass(frozen=True)
class Param:
    name: str
    default: int | None              # None: the program chooses (and says so in its help)
    minimum: int
    maximum: int
    help: str
    sweepable: bool = True

    def parse(self, text: str, workload: str) -> int:
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
    validate: Callable[[dict[str, int]], None] | None = None

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        known = ", ".join(p.name for p in self.params)
        raise UsageError(f"{self.name}: unknown parameter {name!r}: its parameters are {known}")

    def defaults(self) -> dict[str, int]:
        return {p.name: p.default for p in self.params}

    def argv(self, values: dict[str, int | None]) -> list[str]:
        return [str(native.native_path(self.program))] + [f"--{k}={v}" for k, v in values.items() if v is not None]

    @staticmethod
    def parse_result(stdout_tail: str) -> dict | None:
        """The workload's one JSON result line (its last line of stdout), if it printed one."""
        for line in reversed(stdout_tail.strip().splitlines()):
            line = line.strip()
            if line.startswith("{") and line.endswith("}"):
                try:
                    return json.loads(line)
                except json.JSONDecodeError:
                    return None
        return None
