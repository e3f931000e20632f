"""Realloc growth churn: a buffer grown step by step (vector or string doubling, +N growth) is
moved by mremap each time it outgrows its mapping, and its new pages are faulted in; freed and
grown again, it pays it all again."""
from __future__ import annotations

from memsleuth.analysis.findings.base import Finding, kernel_share, mib, rate_per_s
from memsleuth.analysis.cost import confidence_from_share
from memsleuth.events import MECHANISM_FLOORS
from memsleuth.analysis.view import CellView
from memsleuth.units import PAGE_BYTES

# At least this many mremap calls in the run: a few are a program's normal growth. Beyond that,
# the cost of the calls and of the faults of the pages they added decides (analysis/cost.py).
MIN_MREMAP = MECHANISM_FLOORS["mremap"]


def check(view: CellView) -> list[Finding]:
    sc = view.main or view.process
    if sc is None or sc.minflt is None or sc.syscalls["mremap"] < MIN_MREMAP:
        return []
    calls = sc.syscalls["mremap"]
    split = view.kernel_split(sc)
    grown = view.args("mremap", "grow_bytes") if sc.name == "process" else None
    # The pages growth adds are faulted in when first written: at most the bytes grown (from the
    # arguments; without them, one page per call), never more than the first touches counted, and
    # never claimed by first-touch too (view.growth_fault_share).
    fault_ns = split.cost("page-faults") * view.growth_fault_share(sc, split)
    spent = split.cost("mremap") + fault_ns
    if not split.material(spent):
        return []
    where = "the process" if sc.name == "process" else f"region {sc.name}"
    evidence = [f"{calls:,.0f} mremap calls in {where} ({rate_per_s(calls, sc.wall_ns):,.0f} per second) and the "
                f"faults of the pages they added cost about {split.describe(spent)} (mremap "
                f"{split.cost('mremap') / 1e6:,.0f} ms, faults at most {fault_ns / 1e6:,.0f} ms; analysis/cost.py)",
                f"{sc.minflt:,.0f} page faults = {mib(sc.minflt * PAGE_BYTES)}, {sc.minflt / calls:,.1f} per mremap call",
                kernel_share(sc)]
    if grown:
        grows = view.args("mremap", "grow_calls") or 0
        evidence.append(f"{grows:,.0f} of them grew a mapping, by {mib(grown)} in all ({grown / max(grows, 1) / 1024:,.1f}"
                        f" KiB per growth; {view.args_source('mremap')})")
    phase = view.phase("mremap") if sc.name == "process" else None
    if phase:
        evidence.append(phase.text)
    share = split.share(spent)
    return [Finding(
        id="mremap-churn", title=f"Realloc growth churn: buffers grown by mremap: {split.describe(spent)}",
        mechanism="a buffer that outgrows its mapping is moved to a larger one (realloc -> mremap) and its new "
                  "pages are faulted in; growing it in small steps pays a system call per step, and freeing it and "
                  "growing it again repeats the whole cost",
        evidence=evidence,
        advice="reserve the final size up front (vector::reserve, a size hint) or keep the buffer and reuse it "
               "instead of freeing and growing it again; grow geometrically rather than by a fixed step",
        subject=view.label, confidence=confidence_from_share(share, confirmed=grown is not None),
        numbers={"mremap": calls, "minflt": sc.minflt, "sys_share": sc.sys_share, "grow_bytes": grown},
        calls="mremap", cost_ns=spent, cost_share=share, phase=phase.name if phase else None)]
