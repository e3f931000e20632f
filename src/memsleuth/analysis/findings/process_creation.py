"""Starting processes that costs material time: fork (or clone) and exec, from the explaining run's
sampled kernel chains (cpu_profile.SPAWN), where the tree exec'd at least MIN_STARTED programs
beside the command (a program that forks workers without exec'ing is not counted here).

Its words come from what the chains show: where fork's samples copy the parent's page tables
(cpu_profile.MM_COPY) and exec's tear that copy down again (MM_TEARDOWN), the cost grows with the
parent's mapped memory, not with the child's work, and the advice is a start that copies nothing
(posix_spawn, vfork); otherwise it is the processes' number, and the advice is fewer of them.
"""
from __future__ import annotations

from memsleuth.analysis import cost
from memsleuth.analysis.cost import confidence_from_share
from memsleuth.analysis.findings.base import Finding
from memsleuth.analysis.view import CellView
from memsleuth.records import cpu_profile

# From this share of the process-creation samples in the address space's copy and teardown, the
# parent's memory is what the starts cost.
COPY_SHARE = 0.5
# At least this many programs exec'd beside the command, and their samples enough to say when they
# ran (cpu_profile.MIN_SAMPLES), not all at start-up: the command's own start is one exec, and a
# launcher (a pyenv shim is a bash script that runs a dozen programs) is a chain of them, paid once,
# that can be a material share of a short run.
MIN_STARTED = 10


def check(view: CellView) -> list[Finding]:
    sc = view.process
    p = view.profile
    if sc is None or p is None or not p.usable:
        return []
    part = cost.sampled_part(view.kernel_split(sc), cpu_profile.SPAWN)
    k, share, spent = part.samples, part.share, part.ns
    started = view.programs_started
    if not part.material or started < MIN_STARTED:
        return []
    phase = view.phase(*cpu_profile.SPAWN)
    if phase is not None and phase.name == "start-up":
        return []       # a launcher's chain of execs (a pyenv shim runs a dozen programs), paid once
    head = part.headline
    by_call = ", ".join(f"{c} {p.counts[c] / k:.0%}" for c in cpu_profile.SPAWN if p.counts[c])
    evidence = [f"starting processes took {head}: {by_call} of those samples (the explaining run's kernel chains)"]
    # the programs started most often (the command itself, one process, only where nothing else repeats)
    ranked = sorted(p.executables, key=lambda e: -e[2])
    most = [e for e in ranked if e[2] > 1][:3] or ranked[:3]
    evidence.append(f"{started:,} programs were exec'd beside the command: "
                    + ", ".join(f"{name} ({n:,} process{'es' if n != 1 else ''})" for name, _, n in most))
    space = p.address_space
    copy = space["copy"] + space["teardown in exec"] + space["teardown in fork"]
    if copy >= COPY_SHARE * k:
        evidence.append(f"{copy / k:.0%} of them copy the parent's page tables (fork: dup_mmap, copy_page_range) or "
                        "tear that copy down (exec: exit_mmap)")
        mechanism = ("each fork copies the page tables of the parent's private memory (and marks those pages "
                     "copy-on-write), and the child's exec then tears that copy down again: every process started "
                     "costs in proportion to the parent's resident memory, not to the child's work")
        advice = ("start the children without copying the parent: posix_spawn (or vfork, or clone with CLONE_VM), "
                  "which share the parent's memory until the exec; or fork a small helper before the memory grows "
                  "and start the children from it; where a child only computes, a thread instead of a process")
    else:
        mechanism = ("processes are started again and again: every fork or clone and exec pays the kernel's "
                     "process creation and the new program's loading")
        advice = ("start fewer processes: keep workers alive and hand them work, or do the child's work in the "
                  "process itself")
    if phase:
        evidence.append(phase.text)
    return [Finding(
        id="process-creation", title=f"Process creation (fork and exec): {head}",
        mechanism=mechanism, evidence=evidence, advice=advice, subject=view.label,
        confidence=confidence_from_share(share), numbers={"spawn_share": share, "started": started,
                                                          "copy_share": copy / k},
        cost_ns=spent, cost_share=share, phase=phase.name if phase else None)]
