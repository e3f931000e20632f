"""The arguments of a run's memory system calls, as ms-run recorded them from the tracepoints
(`syscall_args` in its document, docs/json-schema.md), typed: per call its totals, its size
histogram and (madvise) its calls by advice; the sampled page faults by what gave their memory
back. A call whose tracepoint did not open is absent, never a call made zero times."""
from __future__ import annotations

from dataclasses import dataclass, field

from memsleuth.records.documents import number as _number, number_in, of_type

# The totals each call may carry (bytes, and the break's and mremap's moves).
TOTALS = ("calls", "bytes", "anon_calls", "anon_bytes", "populate_calls", "populate_bytes", "old_bytes", "new_bytes",
          "grow_calls", "grow_bytes", "up_moves", "up_bytes", "down_moves", "down_bytes")


@dataclass(frozen=True)
class CallArgs:
    """One system call's recorded arguments over the run. `every`: one call in `every` was
    recorded and counts for `every` (the totals are then estimates)."""
    totals: dict[str, float] = field(default_factory=dict)
    every: int = 1
    sizes: tuple[tuple[float, float], ...] = ()               # (2^k bytes, calls)
    size_bytes: dict[float, float] = field(default_factory=dict)  # 2^k -> the bytes of those calls, where recorded
    by_advice: dict[int, tuple[float, float]] = field(default_factory=dict)   # MADV_* -> (calls, bytes)

    @classmethod
    def from_dict(cls, d: dict) -> "CallArgs":
        totals = {k: n for k in TOTALS if k in d and (n := _number(d[k])) is not None}
        rows = of_type(d, "sizes", list, [])
        sizes = tuple((float(r[0]), float(r[1])) for r in rows if _pair(r))
        advice = {}
        for k, v in of_type(d, "by_advice", dict, {}).items():
            if _pair(v) and str(k).lstrip("-").isdigit():
                advice[int(k)] = (float(v[0]), float(v[1]))
        every = int(number_in(d, "every") or 1)
        size_bytes = {float(r[0]): float(r[2]) for r in rows if _pair(r) and len(r) > 2 and _number(r[2]) is not None}
        return cls(totals, max(every, 1), sizes, size_bytes=size_bytes, by_advice=advice)

    def total(self, key: str) -> float | None:
        return self.totals[key] if key in self.totals else None


def _pair(v) -> bool:
    return isinstance(v, (list, tuple)) and len(v) >= 2 and all(_number(x) is not None for x in v[:2])


# What gave a faulting address back before the fault (FaultSamples.by_release has each).
RELEASES = ("none", "munmap", "madvise", "brk", "mapped")


@dataclass(frozen=True)
class FaultSamples:
    """The sampled user page faults, each looked up in the ranges its process released and mapped
    before it: by what gave the address back ("none": a first touch; "munmap", "madvise", "brk";
    "mapped": a mapping made during the run), each (faults, on a present page, writes of a missing
    page); each counts for `every` faults. `mapped_churned`: of the faults in mappings made during
    the run, those in mappings munmap gave back later. `mapped_samples`, `mapped_churned_samples`:
    the same by the CPU samples taken in those faults (by time; absent from older runs: 0).
    `traced_share`: the share of the run's faults traced, where they were traced in random ticks only
    (ms-run --fault-share; the counts are scaled to all of them), else 1."""
    every: int
    by_release: dict[str, tuple[float, float, float]]
    mapped_churned: float = 0.0
    mapped_samples: float = 0.0
    mapped_churned_samples: float = 0.0
    traced_share: float = 1.0

    @classmethod
    def from_dict(cls, d) -> "FaultSamples | None":
        if not isinstance(d, dict) or of_type(d, "by_release", dict) is None:
            return None
        by = {k: (0.0, 0.0, 0.0) for k in RELEASES}
        by.update({str(k): (float(v[0]), float(v[1]), float(v[2])) for k, v in d["by_release"].items()
                   if isinstance(v, (list, tuple)) and len(v) >= 3 and all(_number(x) is not None for x in v[:3])})
        every = int(number_in(d, "every") or 1)
        churned, samples, churned_samples = (number_in(d, k, 0.0) for k in
                                             ("mapped_churned", "mapped_samples", "mapped_churned_samples"))
        share = min(max(number_in(d, "traced_share", 1.0), 0.0), 1.0) or 1.0
        return (cls(max(every, 1), by, churned, samples, churned_samples, share)
                if sum(v[0] for v in by.values()) > 0 else None)


@dataclass(frozen=True)
class SyscallArgs:
    """A run's recorded syscall arguments; empty (false) where none were recorded."""
    calls: dict[str, CallArgs] = field(default_factory=dict)
    faults: FaultSamples | None = None
    unsupported: dict[str, str] = field(default_factory=dict)   # syscall -> why its tracepoint did not open
    lost_records: int = 0                                         # the kernel dropped these: totals are lower bounds
    doc: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_dict(cls, d) -> "SyscallArgs":
        if not isinstance(d, dict) or not d:
            return cls()
        unsupported = {str(k): str(v) for k, v in of_type(d, "unsupported", dict, {}).items()}
        calls = {name: CallArgs.from_dict(v) for name, v in d.items()
                 if name not in ("faults", "unsupported", "lost_records") and isinstance(v, dict)
                 and name not in unsupported}
        return cls(calls, FaultSamples.from_dict(of_type(d, "faults", dict)), unsupported,
                   int(number_in(d, "lost_records", 0)), d)

    def __bool__(self) -> bool:
        return bool(self.doc)

    def of(self, name: str) -> CallArgs | None:
        """The call's arguments, or None where they were not recorded (its tracepoint did not open)."""
        return self.calls[name] if name in self.calls else None

    def to_dict(self) -> dict:
        return self.doc
