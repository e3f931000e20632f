"""Memory system calls no other rule counts (locking memory, syncing a file mapping, NUMA placement,
System V shared memory, ...) that take a material share of the sampled CPU time: named from the
explaining run's kernel chains, one finding per family, so that their time is never left unnamed
beside the findings on the calls memsleuth counts (32 MiB locked per job: mlock 77% of the CPU
time, which no finding named while mmap churn claimed munmap's 13%)."""
from __future__ import annotations

from memsleuth.analysis import cost
from memsleuth.analysis.cost import confidence_from_share
from memsleuth.analysis.findings.base import Finding
from memsleuth.analysis.view import CellView


# family: (its system calls as the kernel chains name them, what they do, the change); its finding's id is
# the family's name with hyphens
FAMILIES = {
    "memory locking": (
        ("mlock", "mlock2", "mlockall", "munlock", "munlockall"),
        "locking memory: mlock faults in every page of the range and pins it (zeroing the fresh ones), and munlock "
        "unpins every page again: each lock pays for the whole range, used or not",
        "lock the memory once and reuse it (a locked pool of buffers) instead of locking and unlocking per use; lock "
        "only the range that must stay resident"),
    "file mapping sync": (
        ("msync",),
        "msync writes a file mapping's dirty pages back to the file (and waits for them with MS_SYNC)",
        "sync less often (once per batch of writes, or MS_ASYNC where durability allows), or write the file with "
        "write() and fsync it once"),
    "NUMA placement": (
        ("mbind", "set_mempolicy", "move_pages", "migrate_pages", "get_mempolicy"),
        "memory placed across NUMA nodes again and again: each call walks or rewrites the policy of the range, and "
        "those that move pages (move_pages, migrate_pages, mbind with MPOL_MF_MOVE) copy them between nodes",
        "place the memory once, where its thread runs (first touch on that node), instead of moving it"),
    "System V shared memory": (
        ("shmget", "shmat", "shmdt", "shmctl"),
        "System V shared memory attached and detached again: every attach maps the segment and every detach "
        "unmaps it (its pages faulted in again after)",
        "attach the segment once per process and keep it attached"),
    "page residency queries": (
        ("mincore",),
        "mincore walks the page tables of the range to report which pages are resident",
        "ask for fewer or smaller ranges, or keep track of what the program has touched itself"),
}


def check(view: CellView) -> list[Finding]:
    sc = view.process
    p = view.profile
    if sc is None or p is None or not p.usable or not p.samples:
        return []
    out = []
    split = view.kernel_split(sc)
    for family, (calls, mechanism, advice) in FAMILIES.items():
        part = cost.sampled_part(split, calls)
        if not part.material:
            continue
        k, share, head = part.samples, part.share, part.headline
        by_call = ", ".join(f"{c} {p.counts[c] / k:.0%}" for c in calls if p.counts[c])
        made = ", ".join(c for c in calls if p.counts[c])
        phase = view.phase(*calls)
        evidence = [f"{made} took {head}: {by_call} of those samples (the "
                    "explaining run's kernel chains; these calls are not counted in the measured runs)"]
        if phase:
            evidence.append(phase.text)
        out.append(Finding(
            id=family.replace(" ", "-").lower(), title=f"{family[0].upper()}{family[1:]} ({made}): {head}",
            mechanism=mechanism, evidence=evidence, advice=advice, subject=view.label,
            confidence=confidence_from_share(share), numbers={"family": family, "share": share},
            cost_ns=part.ns, cost_share=share, phase=phase.name if phase else None))
    return out
