"""Where the explaining run's sampled CPU time went, as check's tables show it: each class of the
profile (records/cpu_profile.py) as a share of the samples with its 95% interval and its sampled
time, the small ones together, the faults by what the kernel chain shows they did, and each
executable's share. Worded by report/builders/check.py."""
from __future__ import annotations

from dataclasses import dataclass

from memsleuth.records import cpu_profile
from memsleuth.records.cpu_profile import Profile


@dataclass(frozen=True)
class Part:
    """One class's share of the explaining run's sampled CPU time, and its time there."""
    name: str
    samples: int
    share: float
    low: float
    high: float
    ns: float

    def to_dict(self) -> dict:
        return {"name": self.name, "samples": self.samples, "share": self.share, "ci_low": self.low,
                "ci_high": self.high, "ns": self.ns}


def breakdown(p: Profile) -> list[Part]:
    """Every class of the profile, the largest first, each as a share of the samples (95% CI) and
    its sampled time (samples x period)."""
    out = []
    for name, k in sorted(p.counts.items(), key=lambda kv: -kv[1]):
        share = k / p.samples if p.samples else 0.0
        lo, hi = p.interval(share)
        out.append(Part(name, k, share, lo, hi, k * float(p.period_ns)))
    return out


@dataclass(frozen=True)
class Rest:
    """The classes too small to show one by one, together."""
    paths: int
    samples: int
    share: float
    ns: float


def shown_and_rest(parts: list[Part], min_share: float) -> tuple[list[Part], Rest | None]:
    """The classes of at least min_share (and every memory path), and the others together."""
    shown = [x for x in parts if x.share >= min_share or x.name in cpu_profile.MEMORY_PATHS]
    rest = [x for x in parts if x not in shown]
    return shown, (Rest(len(rest), sum(x.samples for x in rest), sum(x.share for x in rest), sum(x.ns for x in rest))
                   if rest else None)


def fault_kinds(p: Profile) -> tuple[int, int, list[tuple[str, float]]]:
    """(fault samples whose chain shows what they did, all fault samples, [(kind, share of the
    former)], the largest first)."""
    seen = {k: v for k, v in p.fault_kinds.items() if k != cpu_profile.UNRESOLVED_FAULT}
    total = sum(seen.values())
    shares = [(k, v / total) for k, v in sorted(seen.items(), key=lambda kv: -kv[1])] if total else []
    return total, sum(p.fault_kinds.values()), shares


@dataclass(frozen=True)
class ExecutableShare:
    name: str
    processes: int
    share: float | None               # of all the samples
    user_share: float | None          # of its own samples, in user mode
    top_path: tuple[str, float] | None   # its largest kernel path, and that path's share of its samples


def by_executable(p: Profile, most: int = 10) -> list[ExecutableShare]:
    """The executables with the most samples, each with its share and where its time went."""
    out = []
    for name, n, procs in sorted(p.executables, key=lambda e: -e[1])[:most]:
        by = p.by_executable.get(name, {})
        top = max((k for k in by if k != cpu_profile.USER), key=lambda k: by[k], default=None)
        out.append(ExecutableShare(name, procs, n / p.samples if p.samples else None,
                                   by.get(cpu_profile.USER, 0) / n if n else None,
                                   (top, by[top] / n) if top and n else None))
    return out
