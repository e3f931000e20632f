"""The allocator's own code taking a material share of the CPU time: malloc and free (finding a
free block, splitting and merging chunks, their caches) run often enough to cost, in user mode, so
no system call or page fault count shows it. From the explaining run's user chains
(analysis/user_time.allocator_time): the samples whose innermost frame is the allocator's, over the
program's samples (memsleuth's own heap accounting left out of both)."""
from __future__ import annotations

from memsleuth.analysis import cost, user_time
from memsleuth.analysis.cost import confidence_from_share
from memsleuth.analysis.findings.base import Finding
from memsleuth.analysis.view import CellView
from memsleuth.analysis import phase as phase_mod


def check(view: CellView) -> list[Finding]:
    sc = view.process
    part = user_time.allocator_time(view.cpu_stacks)
    if sc is None or part is None or not part.samples:
        return []
    cpu_ns = (sc.user_ns or 0.0) + (sc.sys_ns or 0.0)
    share = part.share
    spent = share * cpu_ns
    if spent < cost.MIN_COST_NS or share < cost.MATERIAL_SHARE:
        return []
    lo, hi = part.interval
    head = f"{cost.ms(spent)} ms = {cost.pct(share)} of the CPU time (sampled, 95% CI {lo:.0%}-{hi:.0%})"
    fns = ", ".join(f"{fn} {k / part.samples:.0%}" for fn, k in part.functions)
    # the callers the chains name (a program built without frame pointers names none past malloc)
    callers = ", ".join(f"{fn} {k / part.samples:.0%}" for fn, k in part.callers if not fn.startswith(("[", "(")))
    evidence = [f"{part.samples:,} of the program's {part.total:,} CPU samples were in the allocator's own code "
                f"(the explaining run's user call chains): {head}",
                f"by function: {fns}"] + ([f"called from: {callers}"] if callers else [])
    if part.wrapped:
        evidence.append(f"{part.wrapped:,} of those samples were in memsleuth's heap accounting, which runs around "
                        "each malloc and free in the explaining run: counted as the allocator's calls")
    cs = view.cpu_stacks
    found = phase_mod.of_buckets(list(part.when), cs.when_bucket_ns, cs.when_span_ns) if cs is not None else None
    if found:
        evidence.append(found.text)
    others = ", ".join(a for a in ("glibc", "mimalloc", "jemalloc", "tcmalloc") if a != view.allocator)
    return [Finding(
        id="allocator-time", title=f"Time in the allocator's own code (malloc and free): {head}",
        mechanism="the program allocates and frees often enough that the allocator's own work (finding a free "
                  "block, splitting and merging chunks, moving blocks through its caches) takes this share of the "
                  "CPU time; it runs in user mode, so no system call or page fault count shows it",
        evidence=evidence,
        advice=f"allocators differ most on this path: measure {others} on this program (`memsleuth check --try`, "
               "or `memsleuth compare`); or allocate less " + ("where the callers above do" if callers else
                                                                "in the code that calls them") +
               ": reuse objects, reserve containers' sizes, free together what is allocated together (an arena or a "
               "pool)",
        subject=view.label, confidence=confidence_from_share(share), who="allocator",
        numbers={"share": share, "functions": [f for f, _ in part.functions], "callers": [c for c, _ in part.callers]},
        cost_ns=spent, cost_share=share, phase=found.name if found else None)]
