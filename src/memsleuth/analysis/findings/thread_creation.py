"""Creating threads that costs material time: clone, and exit where it tears no address space down (a
thread's end), from the explaining run's sampled kernel chains (cpu_profile.SPAWN, EXIT), where the
tree stayed a few processes and exec'd few programs, so the clones made threads (a thread shares its
process's id: the profile's processes do not count it). A program that starts processes is
process_creation's."""
from __future__ import annotations

from memsleuth.analysis import cost
from memsleuth.analysis.cost import confidence_from_share
from memsleuth.analysis.findings.base import Finding
from memsleuth.analysis.findings.process_creation import MIN_STARTED
from memsleuth.analysis.view import CellView
from memsleuth.records import cpu_profile

# The clone calls that make a thread (fork and vfork make processes, exec starts a program).
CLONES = ("clone", "clone3")


def thread_ends(p) -> int:
    """The samples in exit that tore no address space down: threads ending (a process's last thread
    tears its memory down, cpu_profile.MM_TEARDOWN)."""
    return max(0, p.counts[cpu_profile.EXIT] - p.address_space["teardown in exit"])


def threads_made(view: CellView) -> tuple[cost.SampledPart, int] | None:
    """The clones' part of the process's CPU time and the tree's processes, where creating threads is a
    material cost (the tree a few processes, so the clones made threads), else None."""
    sc = view.process
    p = view.profile
    if sc is None or p is None or not p.usable:
        return None
    part = cost.sampled_part(view.kernel_split(sc), CLONES, extra=thread_ends(p))
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
    parts = [(c, p.counts[c]) for c in CLONES if p.counts[c]] + [("the threads' ends (exit)", thread_ends(p))]
    by_call = ", ".join(f"{c} {n / part.samples:.0%}" for c, n in parts if n)
    evidence = [f"creating and ending threads took {head}: {by_call} of those samples (the explaining run's kernel "
                "chains)",
                f"the tree was {processes:,} process{'es' if processes != 1 else ''}: the clones made threads, "
                "which share their process's id"]
    if any(s.events_by != "cgroup" for s in view.explain + view.samples):
        evidence.append("memsleuth's own perf events were copied into every new thread (no cgroup of the command's "
                        "own: `memsleuth doctor`), so each clone cost more in the runs measured here than in the "
                        "program alone (docs/findings.md)")
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
