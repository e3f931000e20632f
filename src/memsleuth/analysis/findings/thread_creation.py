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

# The clone calls that make a thread (fork and vfork make processes, exec starts a program).
CLONES = ("clone", "clone3")


def threads_made(view: CellView) -> tuple[cost.SampledPart, int] | None:
    """The clones' part of the process's CPU time and the tree's processes, where creating threads is a
    material cost (the tree a few processes, so the clones made threads), else None."""
    sc = view.process
    p = view.profile
    if sc is None or p is None or not p.usable:
        return None
    part = cost.sampled_part(sc, p, CLONES)
    processes = sum(n for _, _, n in p.executables)
    if not part.material or processes > MIN_STARTED:
        return None
    return part, processes


def check(view: CellView) -> list[Finding]:
    made = threads_made(view)
    if made is None:
        return []
    part, processes = made
    p = view.profile
    phase = view.phase(*CLONES)
    if phase is not None and phase.name == "start-up":
        return []       # a pool's threads started once
    head = part.headline
    by_call = ", ".join(f"{c} {p.counts[c] / part.samples:.0%}" for c in CLONES if p.counts.get(c))
    evidence = [f"clone took {head}: {by_call} of those samples (the explaining run's kernel chains)",
                f"the tree was {processes:,} process{'es' if processes != 1 else ''}: the clones made threads, "
                "which share their process's id",
                "memsleuth's own perf events are copied into every new thread, so each clone costs more in the runs "
                "measured here than in the program alone (docs/findings.md)"]
    if phase:
        evidence.append(phase.text)
    return [Finding(
        id="thread-creation", title=f"Thread creation: {head}",
        mechanism="threads are created again and again: every clone pays the kernel's creation of a task (and the "
                  "thread's end its teardown), whatever little work the thread then does",
        evidence=evidence,
        advice="keep the threads alive and hand them the work (a thread pool with a work queue) instead of a thread "
               "per task",
        subject=view.label, who="program", confidence=confidence_from_share(part.share),
        numbers={"clone_share": part.share, "processes": processes}, calls=None,
        cost_ns=part.ns, cost_share=part.share, phase=phase.name if phase else None)]
