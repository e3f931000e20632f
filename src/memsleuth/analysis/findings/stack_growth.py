"""A runtime growing its threads' stacks takes a material share of the CPU time: Go starts each
goroutine on a small stack and, when a call needs more, copies the whole stack to one twice the size
and adjusts every pointer into it (runtime.morestack -> newstack -> copystack). A goroutine per
request with a deep call path pays that at each doubling, request after request. The cost is the
explaining run's user-mode samples with a frame of the growth in their chain (analysis/user_time.py,
runtimes.TABLE's `stack_growth`), outside the collector (which shrinks stacks too, as its own work).
The advice is the runtime's and the program's, never an allocator's: a goroutine stack is the
runtime's memory."""
from __future__ import annotations

from memsleuth.analysis.findings.base import Finding, costed, named_callers, runtime_part_finding
from memsleuth.analysis.user_time import stack_growth
from memsleuth.analysis.view import CellView


def check(view: CellView) -> list[Finding]:
    found = []
    for g, paid in costed(view, stack_growth(view.cpu_stacks)):
        rt = g.runtime
        evidence = [f"{g.samples:,} of the {g.total:,} CPU samples ran in {rt.name}'s growth of {rt.stacks}, in user "
                    "mode (a frame of it in the sample's call chain: the stack copied to a larger one)",
                    "sampled functions: " + ", ".join(f"{fn} {k:,}" for fn, k in g.functions)]
        # the callers, where the chains reach past the runtime's switch to its own stack (most end there)
        named = named_callers(g.callers, g.samples)
        if named:
            evidence.append("the stacks grew under " + ", ".join(f"{fn} ({share:.0%})" for fn, share in named))
        found.append(runtime_part_finding(
            view, g, paid, evidence, {},
            id="stack-growth",
            title=f"{rt.name} growing {rt.stacks}: {paid.headline}",
            mechanism=(f"{rt.name} starts {rt.stacks} small; a call that needs more stack than is left makes the runtime "
                       "copy the whole stack to one twice the size and adjust every pointer into it: the cost recurs "
                       "where goroutines with a deep call path are started again and again (each starts small), or "
                       "where the collector shrinks a stack that then grows again"),
            advice=rt.stack_advice))
    return found
