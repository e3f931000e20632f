"""A preload that did not reach every program of the tree: the cell's figures are then partly (or
wholly) the default allocator's, whatever the cell is called.

The explaining run's CPU sampler sees every exec of the tree and every executable mapping
(ms-run's cpu_profile): a process whose image never mapped the allocator's library ran without
it. `env -i`, a setuid program, a static executable, a runtime that clears its environment, or a
shell script that sets LD_PRELOAD itself do that. This reads which programs, and how much of the
CPU time they had."""
from __future__ import annotations

import os

from memsleuth.analysis.findings.base import Finding
from memsleuth.analysis.view import CellView

# The processes that missed the allocator ran at least this share of the sampled CPU time: below
# it they are a shell's helpers, whose allocator changes nothing measured.
MIN_SHARE = 0.05
# Above this share the cell measured the default allocator, not the one it is named for.
MOST = 0.5


def check(view: CellView) -> list[Finding]:
    preload = next((s.raw.get("preload") for s in view.samples if s.raw.get("preload")), None)
    p = view.profile
    if not preload or p is None or not p.samples or not p.preloads:
        return []
    # The allocator is the last library the explaining run preloads (the launcher's order); its
    # path as the kernel named it, else the same file name.
    paths = list(p.preloads)
    want = os.path.basename(str(preload).split(":")[-1])
    path = paths[-1] if paths else None
    if path is None or not (os.path.basename(path).startswith(want.split(".so")[0])):
        return []
    missed = [(exe, n, execd, mapped) for exe, n, execd, mapped in p.preloads[path] if mapped < execd]
    share = sum(n * (execd - mapped) / execd for _, n, execd, mapped in missed) / p.samples
    if not missed or share < MIN_SHARE:
        return []
    lib = os.path.basename(path)
    names = "; ".join(f"{exe}: {execd - mapped:,} of {execd:,} process{'es' if execd > 1 else ''} "
                      f"({n / p.samples:.0%} of the sampled CPU time)" for exe, n, execd, mapped in
                      sorted(missed, key=lambda m: -m[1])[:5])
    most = share >= MOST
    title = (f"The allocator never reached the measured program: {share:.0%} of the CPU time ran without {lib}"
             if most else f"The allocator did not reach every program: {share:.0%} of the CPU time ran without {lib}")
    return [Finding(
        id="preload-missed", title=title,
        mechanism=("programs of the command's tree started without the preloaded allocator (their image never "
                   f"mapped {lib}): their allocator is not the one this cell names, so its figures are "
                   + ("not this allocator's" if most else "partly another allocator's")),
        evidence=[f"programs whose image did not map {lib} (the explaining run's exec and mapping records): {names}",
                  f"processes that did: {sum(m for *_, m in p.preloads[path]):,}"],
        advice=("pass the allocator where the program starts: a command that clears the environment (env -i, sudo, a "
                "setuid program) drops LD_PRELOAD, and a static executable cannot take it; for those, link the "
                "allocator in or set LD_PRELOAD inside the script that starts the program"),
        subject=view.label, confidence="high" if most else "medium",
        numbers={"library": path, "missed": [list(m) for m in missed], "cpu_share": share},
        cost_share=share)]
