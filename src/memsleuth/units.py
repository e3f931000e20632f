"""Parsing and formatting of quantities. Names say the unit; these functions keep it that way."""
from __future__ import annotations

import math
import os
import re

from memsleuth.errors import UsageError

# The base page size, measured on this machine (4 KiB on x86-64, 4 or 16 or 64 KiB on arm64):
# page faults are counted per page, so bytes and faults convert through it.
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
HUGE_PAGE_BYTES = 2 << 20     # a transparent huge page on x86-64 (a PMD's span)

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_SIZE_FACTORS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
# ms-run takes the limit as a 64-bit byte count; 1 PiB is beyond any machine it will meet.
MAX_SIZE_BYTES = 1 << 50


def parse_size_bytes(text: str) -> int:
    """'512M', '1GiB', '4096' -> bytes (binary multiples: a memory limit is counted in pages)."""
    m = _SIZE.match(text)
    if not m:
        raise UsageError(f"bad size {text!r}: expected a number with an optional K/M/G/T suffix, like 512M")
    value = float(m.group(1)) * _SIZE_FACTORS[m.group(2).lower()]
    if value < 1:
        raise UsageError(f"bad size {text!r}: must be at least 1 byte")
    if value > MAX_SIZE_BYTES:
        raise UsageError(f"bad size {text!r}: larger than {MAX_SIZE_BYTES >> 40} TiB")
    return int(value)


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "n/a"
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= factor:
            return f"{n / factor:.1f} {unit}"
    return f"{n:.0f} B"


def fmt_value(v: float | None, unit: str) -> str:
    """A gate or trend value in its unit: seconds as ms or ns, bytes as MiB, counts with commas."""
    if v is None:
        return "-"
    if unit == "s":
        return f"{v * 1e3:,.3f} ms" if v >= 1e-4 else f"{v * 1e9:,.1f} ns"
    if unit == "bytes":
        return f"{v / (1 << 20):,.1f} MiB"
    return f"{v:,.0f}"


def fmt_size_arg(n) -> str:
    """A byte count as a size argument reads and parses back (parse_size_bytes): 4194304 -> '4M',
    1536 -> '1536'; a list '4194304,1048576' -> '4M,1M'."""
    if isinstance(n, str) and "," in n:
        return ",".join(fmt_size_arg(x) for x in n.split(","))
    try:
        v = int(n)
    except (TypeError, ValueError):
        return str(n)
    for suffix, factor in (("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if v >= factor and v % factor == 0:
            return f"{v // factor}{suffix}"
    return str(v)


def fmt_si(x: float | None, unit: str = "") -> str:
    """3 significant figures with an SI prefix: 84.2M ops/s, 1.25k."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    for suffix, factor in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= factor:
            return f"{x / factor:.3g}{suffix}{(' ' + unit) if unit else ''}"
    return f"{x:.3g}{(' ' + unit) if unit else ''}"


def fmt_count(x: float | None) -> str:
    if x is None:
        return "n/a"
    return f"{x:,.0f}"


def fmt_seconds(ns: float | None) -> str:
    if ns is None:
        return "n/a"
    s = ns / 1e9
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} µs"


def parse_fraction(text: str, what: str) -> float:
    """'2%' or '0.02' -> 0.02. A bare number of 1 or more is refused: is '2' 2% or 200%?"""
    t = text.strip()
    try:
        if t.endswith("%"):
            value = float(t[:-1]) / 100
        else:
            value = float(t)
            if value >= 1:
                raise UsageError(f"{what} {text!r} is ambiguous: write it as a percentage like {t}% "
                                 "or as a fraction below 1")
    except ValueError:
        raise UsageError(f"{what} must be a percentage like 2% or a fraction like 0.02, got {text!r}") from None
    if not 0 < value < 1:
        raise UsageError(f"{what} must be between 0% and 100%, got {text!r}")
    return value


def fmt_num(x: float | None, spec: str = ",.0f", unit: str = "") -> str:
    """A number in a given format with its unit, or n/a."""
    if x is None:
        return "n/a"
    return f"{x:{spec}}" + (f" {unit}" if unit else "")


def fmt_ms(ns: float | None) -> str:
    return "n/a" if ns is None else f"{ns / 1e6:,.2f} ms"


def fmt_mib(n_bytes: float | None, signed: bool = False) -> str:
    if n_bytes is None:
        return "n/a"
    return f"{n_bytes / (1 << 20):{'+' if signed else ''},.1f} MiB"


def gb_per_s(n_bytes: float | None, wall_ns: float | None) -> float | None:
    """Decimal GB/s, the unit of memcpy benchmarks (perf bench, STREAM)."""
    return n_bytes / wall_ns if n_bytes and wall_ns else None
