"""A runtime's garbage collector takes a material share of the CPU time: the explaining run's CPU
samples whose user chain runs the collector's own code (analysis/user_time.py, the frames in
runtimes.TABLE's `gc`). Its cost is those user-mode samples' share of all the samples; the
collector's samples in the kernel (the faults and calls it made) are the kernel's account, costed by
their own findings, and quoted here only as evidence, so no sample is counted twice. The advice is
the runtime's own (how often it collects, how much it scans), never an allocator's: a collected heap
is the runtime's memory."""
from __future__ import annotations

from memsleuth.analysis.findings.base import Finding, costed, runtime_part_finding
from memsleuth.analysis.user_time import collectors
from memsleuth.analysis.view import CellView


def check(view: CellView) -> list[Finding]:
    found = []
    for c, paid in costed(view, collectors(view.cpu_stacks)):
        rt = c.runtime
        evidence = [f"{c.samples:,} of the {c.total:,} CPU samples ran in {rt.name}'s collector, in user mode "
                    f"(a frame of it in the sample's call chain)",
                    "its frames nearest the sampled code, by samples: " + ", ".join(f"{fn} {k:,}" for fn, k in c.functions)]
        if c.kernel_samples:
            evidence.append(f"another {c.kernel_samples:,} samples ({c.kernel_share:.0%}) were in the kernel, entered "
                            "from the collector (its page faults and calls): the kernel's account, not counted here")
        if c.executables:
            evidence.append("in the processes of " + ", ".join(f"{exe} ({k:,} samples)" for exe, k in c.executables))
        found.append(runtime_part_finding(
            view, c, paid, evidence, {"kernel_samples": c.kernel_samples},
            id="garbage-collection",
            title=f"{rt.name}'s garbage collector: {paid.headline}",
            mechanism=(f"{rt.name}'s collector walks the objects it manages each time it runs (a tracing "
                       "collector the live heap, CPython's cyclic one the containers of the generations it collects), "
                       "so its time grows with how often it runs and with how many objects and pointers it walks"),
            advice=rt.gc_advice))
    return found
