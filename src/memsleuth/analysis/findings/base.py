"""What a rule returns."""
from __future__ import annotations

import re

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from memsleuth.analysis import cost, phase as phase_mod
from memsleuth.records.model import Readings

if TYPE_CHECKING:
    from memsleuth.analysis.view import CellView


@dataclass(frozen=True)
class Finding:
    id: str                     # stable rule id, e.g. "madvise-storm"
    title: str                  # one line
    mechanism: str              # one sentence: what the numbers show is happening
    evidence: list[str]         # the measured numbers that prove it
    advice: str                 # what to change
    confidence: str             # "high", "medium" or "low"
    subject: str = ""           # the cell or region it is about
    numbers: Readings = field(default_factory=Readings)  # the same numbers, machine-readable; None: not one of them
    # Who makes the costly calls: "program", "allocator", or "undetermined"; `calls` names the
    # syscall whose count decides it (analysis.attribute compares it across allocators).
    who: str = "undetermined"
    calls: str | None = None
    who_why: str | None = None  # undetermined: why the counts could not decide (analysis.attribute)
    call_sites: list[str] = field(default_factory=list)   # where the faults and calls come from (sites.py)
    # What the mechanism costs in this run (analysis/cost.py): kernel time in ns and its share of
    # the scope's CPU time for the time mechanisms, bytes for the memory ones; findings are
    # ordered by it. `phase`: when in the run the cost arises (analysis/phase.py), if known.
    cost_ns: float | None = None
    cost_share: float | None = None
    cost_bytes: float | None = None
    phase: str | None = None
    # Advice that holds whoever makes the calls (the huge pages a churn's re-faults zero): kept first
    # when the culprit's advice replaces the rule's (analysis/summary.with_call_sites).
    advice_first: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "numbers", Readings(self.numbers or {}))

    def with_advice(self, advice: str) -> str:
        """`advice` with advice_first before it, said once (a runtime's advice quotes the rule's, which
        begins with it, after its own)."""
        if not self.advice_first or advice.startswith(self.advice_first):
            return advice
        rest = advice.replace(f"{self.advice_first}; ", "").replace(self.advice_first, "")
        # a quote that held nothing else leaves its label ("; on the allocator's side: "): dropped with it
        rest = re.sub(r"(^|;\s*)[^;:]*:\s*$", "", rest).strip("; ")
        return f"{self.advice_first}; {rest}" if rest else self.advice_first

    @property
    def weight(self) -> float:
        """How findings are ordered: by time share, memory mechanisms by their bytes' share."""
        return self.cost_share if self.cost_share is not None else 0.0

    def to_dict(self) -> dict:
        return {"id": self.id, "title": self.title, "mechanism": self.mechanism, "evidence": self.evidence,
                "advice": self.advice, "confidence": self.confidence, "subject": self.subject,
                "numbers": self.numbers, "who": self.who, "calls": self.calls, "who_why": self.who_why,
                "call_sites": self.call_sites,
                "cost_ns": self.cost_ns, "cost_share": self.cost_share, "cost_bytes": self.cost_bytes,
                "phase": self.phase}


def confidence_from_margin(margin: float) -> str:
    """A finding's confidence from how far past its threshold the deciding number is (the
    number over the threshold): 3x and more is high, 1.5x medium. A time finding's comes from its
    cost instead (cost.confidence_from_share)."""
    return "high" if margin >= 3 else "medium" if margin >= 1.5 else "low"


def mib(n_bytes: float) -> str:
    return f"{n_bytes / (1 << 20):.1f} MiB"


def kernel_share(sc, threshold: float | None = None) -> str:
    """The evidence line every kernel-cost rule quotes: system time and its share of CPU time."""
    text = f"kernel time {sc.sys_ns / 1e6:,.0f} ms = {(sc.sys_share or 0):.0%} of CPU time"
    return text + (f" (threshold {threshold:.0%})" if threshold is not None else "")


def rate_per_s(count: float, wall_ns: float) -> float:
    return count / (wall_ns / 1e9) if wall_ns else 0.0


class CellRule(Protocol):
    """A rule module about one cell: `check(view)` returns the findings its numbers show."""
    def check(self, view: "CellView") -> list[Finding]: ...


class PairRule(Protocol):
    """A rule module about a cell resolved slower than its group's fastest."""
    def check_pair(self, slower: "CellView", faster: "CellView") -> list[Finding]: ...


class RunRule(Protocol):
    """A rule module about a whole run (every cell's view)."""
    def check_run(self, views: "list[CellView]") -> list[Finding]: ...


# A part's callers are named where the ones its chains name hold at least this share of its samples
# together (a program built without frame pointers names none past malloc; Go's chains mostly end at
# the runtime's switch to its own stack).
CALLERS_SHOWN = 0.5


def named_callers(callers, samples: int) -> list[tuple[str, float]]:
    """(function, share of the part's samples) of the callers the chains name ("(no caller named)" and
    "[object]" are not names), where together they hold CALLERS_SHOWN of the samples; else none."""
    named = [(fn, k) for fn, k in callers if not fn.startswith(("[", "("))]
    if not samples or sum(k for _, k in named) < CALLERS_SHOWN * samples:
        return []
    return [(fn, k / samples) for fn, k in named]


@dataclass(frozen=True)
class UserCost:
    """A material part of the user-mode samples as a time finding states it: its ns of the measured
    runs' CPU time, its share of it, the headline, and its phase where its samples' times say one."""
    ns: float
    share: float
    headline: str
    phase: phase_mod.Phase | None


def costed(view: "CellView", parts) -> list[tuple]:
    """The parts (analysis/user_time: collectors, stack growths) that cost a material share, each
    with its cost (user_cost)."""
    return [(part, paid) for part in parts if (paid := user_cost(view, part)) is not None]


def runtime_part_finding(view: "CellView", part, paid: UserCost, evidence: list[str], numbers: dict,
                         **words) -> Finding:
    """A finding on a runtime's part of the user-mode samples (a collector, its stacks' growth):
    `evidence` then when it arises; `words`: id, title, mechanism, advice."""
    return Finding(evidence=evidence + ([paid.phase.text] if paid.phase else []), subject=view.label,
                   confidence=cost.confidence_from_share(paid.share), who="runtime",
                   numbers={"runtime": part.runtime.name, "samples": part.samples, "total_samples": part.total,
                            "share": part.share, "ci_low": part.interval[0], "ci_high": part.interval[1], **numbers},
                   cost_ns=paid.ns, cost_share=paid.share, phase=paid.phase.name if paid.phase else None, **words)


def user_cost(view: "CellView", part) -> UserCost | None:
    """What a part of the explaining run's user-mode samples (analysis/user_time: a collector, a runtime's
    stack growth) costs in the measured runs' account (cost.user_part); None where the cell has no
    measured run or the part is not material."""
    sc = view.process
    if sc is None:
        return None
    s = view.cpu_stacks
    paid = cost.user_part(sc, s, part.samples)
    if not cost.material(paid.ns, paid.share):
        return None
    found = view.user_phase(part.when)
    return UserCost(paid.ns, paid.share, cost.sampled_headline(paid.ns, paid.share, paid.interval), found)
