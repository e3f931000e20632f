"""Creating threads that costs material time: clone from the explaining run's sampled kernel chains
(cpu_profile.SPAWN), where the tree stayed a few processes and exec'd few programs, so the clones
made threads (a thread shares its process's id: the profile's processes do not count it). A
program that starts processes is process_creation's."""
from __future__ import annotations

from memsleuth.analysis import cost
from memsleuth.analysis.cost import confidence_from_share
from memsleuth.analysis.findings.base import Finding
from memsleuth.analysis.findings.process_creation import MIN_STARTED
from memsleuth.analysis.view import CellView
from memsleuth.records import cpu_profile

# The clone calls that make a thread (fork and vfork make processes, exec starts a program).
CLONES = ("clone", "clone3")


def threads_made(view: CellView) -> tuple[int, float, float] | None:
    """(the clone samples, their share of the CPU time, its ns) where creating threads is a material
    cost of the process (the tree a few processes, so the clones made threads), else None."""
    sc = view.process
    p = view.profile
    if sc is None or p is None or not p.usable:
        return None
    k = sum(p.counts.get(c, 0) for c in CLONES)
    share = k / p.samples if p.samples else 0.0
    spent = share * ((sc.user_ns or 0.0) + (sc.sys_ns or 0.0))
    processes = sum(n for _, _, n in p.executables)
    if not cost.material(spent, share) or k < cpu_profile.MIN_SAMPLES or processes > MIN_STARTED:
        return None
    return k, share, spent


def check(view: CellView) -> list[Finding]:
    made = threads_made(view)
    if made is None:
        return []
    k, share, spent = made
    p = view.profile
    processes = sum(n for _, _, n in p.executables)
    phase = view.phase(*CLONES)
    if phase is not None and phase.name == "start-up":
        return []       # a pool's threads started once
    head = cost.sampled_headline(spent, share, p.interval(share))
    by_call = ", ".join(f"{c} {p.counts[c] / k:.0%}" for c in CLONES if p.counts.get(c))
    evidence = [f"clone took {head}: {by_call} of those samples (the explaining run's kernel chains)",
                f"the tree was {processes:,} process{'es' if processes != 1 else ''}: the clones made threads, "
                "which share their process's id"]
    if phase:
        evidence.append(phase.text)
    return [Finding(
        id="thread-creation", title=f"Thread creation: {head}",
        mechanism="threads are created again and again: every clone pays the kernel's creation of a task (and the "
                  "thread's end its teardown), whatever little work the thread then does",
        evidence=evidence,
        advice="keep the threads alive and hand them the work (a thread pool with a work queue) instead of a thread "
               "per task",
        subject=view.label, who="program", confidence=confidence_from_share(share),
        numbers={"clone_share": share, "processes": processes}, calls=None,
        cost_ns=spent, cost_share=share, phase=phase.name if phase else None)]
