"""Page faults of a kind no other rule words: copy-on-write, a private file mapping's copies, a shared file
mapping's writes, shared memory, a mapped file's pages, swap-in, reclaim (a memory cgroup's limit or the
machine's), NUMA hinting, hugetlbfs, userfaultfd, and those of a kind memsleuth does not name, said as
unknown (the zero-fill of fresh memory, small pages or huge, is first-touch's and the churn rules',
which name huge pages where they are what was zeroed). The explaining run's CPU samples taken in the
fault handler say what each fault did (records/cpu_profile.FAULT_KINDS, from the kernel's call chain);
the page-fault time is shared out among the kinds in the proportions of the samples whose chain shows
it. The first-touch and churn rules claim only the small-page zero-fill part (view.zero_fill_share), so
no fault's time is claimed twice, and a fault that copied a page or read a file is never called fresh
memory."""
from __future__ import annotations

from memsleuth.analysis import user_time
from memsleuth.analysis.cost import confidence_from_share
from memsleuth.analysis.findings.base import Finding
from memsleuth.analysis.findings.process_creation import MIN_STARTED
from memsleuth.analysis.view import CellView
from memsleuth.records.cpu_profile import FAULT, UNNAMED_FAULT, when_key
from memsleuth.records.model import Counts

# Per kind: the title's words, the mechanism, and what to change.
KINDS: dict[str, tuple[str, str, str]] = {
    "copy-on-write": (
        "Copy-on-write faults: pages shared with another process are copied when written",
        "a write to a page shared after fork (or to a private file mapping) faults, and the kernel copies the "
        "page before the write goes on; a forked worker that writes to the parent's data copies it page by "
        "page",
        "build the shared data before forking and do not write it in the workers; fork the workers earlier, "
        "before the data grows; or use threads, which share without copying"),
    "private file copy": (
        "Private file-mapping faults: each page of a privately mapped file is copied when first written",
        "a file mapped MAP_PRIVATE and written: the first write to each page faults, and the kernel reads the "
        "file's page (from the page cache, or the disk first) and copies it into a page of the process's own "
        "before the write goes on; a private mapping made per use copies every written page again each time",
        "to change a copy of the data, read() the file once into a buffer of your own and reuse it (copying what a "
        "use needs from it); keep a private mapping across uses where its changed pages can be kept; map it "
        "MAP_SHARED where the writes are meant for the file"),
    "shared file write": (
        "Shared file-mapping write faults: each write to a clean page of a MAP_SHARED file faults to dirty it",
        "a page of a file mapped MAP_SHARED stays read-only while it is clean (after it is mapped, and again after "
        "each writeback: msync, fsync or the kernel's flusher); the next write to it faults, and the file system "
        "makes it writable and dirty (page_mkwrite: its blocks reserved, the page and its buffers marked dirty) "
        "before the write goes on; nothing is copied, but a program that writes its pages and syncs them again "
        "and again pays this fault per page per sync",
        "sync less often (gather the writes to a page between syncs; sync once per batch, not per update); write "
        "fewer pages per sync (keep the updated records together); or write the file with pwrite() from a buffer "
        "and fsync once where the mapping only writes; data that need not reach the file belong in anonymous "
        "memory"),
    "file-backed": (
        "File-backed page faults: a mapped file's pages are faulted in",
        "a mapped file is not read until its pages are touched: each first access faults a page in from the page "
        "cache (or the disk), and a file mapped and unmapped per use is faulted in again every time",
        "keep the file mapped across uses instead of mapping it per request; for a mapping read whole, "
        "MAP_POPULATE or madvise(MADV_WILLNEED); or read() it once into a buffer that is reused"),
    "shared memory": (
        "Shared-memory page faults: pages of shared memory are allocated and zeroed as they are first touched",
        "shared memory (MAP_SHARED|MAP_ANONYMOUS, a memfd, tmpfs or /dev/shm) is backed by the kernel's shmem "
        "pages, not by a file on disk: each first touch of a page allocates it, zeroes it and adds it to the shared "
        "object; a region mapped again, or its pages punched out (fallocate PUNCH_HOLE, MADV_REMOVE), per use "
        "pays it all again",
        "keep the shared region and reuse its pages instead of mapping a new one (or punching its pages out) per "
        "use; where no other process needs to see it, private anonymous memory (MAP_PRIVATE) is cheaper to fault "
        "in, and an allocator can keep it for reuse"),
    "swap-in": (
        "Swap-in faults: the process's own pages are read back from swap",
        "pages of the process were swapped out under memory pressure and each access faults them back in",
        "give the process (or the machine) more memory, or shrink what it keeps resident"),
    "memory-limit reclaim": (
        "Page faults that reclaim memory first: the program is at its memory cgroup's limit",
        "the memory cgroup the program runs in (a container's, a systemd unit's or a batch job's memory limit: "
        "memory.max or memory.high, or cgroup v1's limit_in_bytes) is full, so each fault that needs a page "
        "first reclaims one of the group's own pages (dropping cached file pages, which must then be read "
        "again, or swapping), however much memory the machine has free",
        "raise the group's limit above the working set (the container's or unit's MemoryMax or MemoryHigh, a "
        "Slurm job's --mem), or shrink the working set to fit under it: a file read whole again and again is "
        "read from the disk each time when its pages cannot all stay cached in the group"),
    "direct reclaim or compaction": (
        "Page faults that reclaim or compact memory first: the machine is short of free memory",
        "the page a fault needs could not be taken from free memory (or, for a huge page, from contiguous free "
        "memory), so the faulting thread reclaimed pages (writing back, dropping caches, swapping) or compacted "
        "memory itself before it could go on",
        "leave the machine more free memory (a smaller working set, fewer processes, or a memory limit that "
        "leaves headroom); where it is compaction for transparent huge pages, set THP defrag to madvise or "
        "never, or allocate the huge pages once at start"),
    "mmap_lock wait": (
        "Page faults waiting for the memory-map lock: other threads' mmap, munmap or mprotect hold it",
        "a page fault takes the process's memory-map lock (mmap_lock) for reading; while another thread maps, "
        "unmaps or changes protections it holds the lock for writing, and every faulting thread spins or waits "
        "for it",
        "fewer mmap, munmap and mprotect calls while other threads run: an allocator that keeps freed memory "
        "mapped (mimalloc, jemalloc, or glibc with a higher mmap_threshold and trim_threshold), buffers reused "
        "instead of mapped per use, memory mapped before the threads start"),
    "NUMA hinting": (
        "NUMA hinting faults: the kernel's NUMA balancing unmaps pages to learn which node touches them",
        "automatic NUMA balancing makes pages inaccessible from time to time; the next access faults, and a page "
        "used from another node may be migrated to it",
        "bind the threads and their memory to one node (numactl --cpunodebind/--membind) so there is nothing to "
        "balance; where placement is already right, sysctl kernel.numa_balancing=0 stops the scanning"),
    "hugetlbfs": (
        "hugetlbfs faults: pages of a MAP_HUGETLB or hugetlbfs mapping are faulted in",
        "each first touch of a hugetlbfs mapping takes a reserved huge page (2 MiB or 1 GiB) and zeroes all of it, "
        "and a private one written after fork copies it whole",
        "map it once and keep it for the run instead of per use; MAP_POPULATE pays the faults at start; touch "
        "only what is needed (a sparse table wastes most of each page)"),
    "userfaultfd": (
        "userfaultfd faults: a user-space handler resolves the process's page faults",
        "the mapping is registered with userfaultfd: each fault waits for a handler thread (a live migration, a "
        "snapshot, a runtime's lazy heap) to supply the page",
        "the handler's own cost is the one to look at: fewer, larger UFFDIO_COPY calls, or prefetching the pages "
        "it will be asked for"),
}
# File-backed faults where the program does not map and unmap per use (fewer munmap calls than this, a
# loader's few): one mapping read again, its pages dropped from the page cache in between.
KEPT_MAPPED_MUNMAPS = 10
FILE_KEPT_MAPPED = (
    "a mapped file is not read until its pages are touched: each first access faults a page in from the page "
    "cache, or from the disk where the kernel dropped it (a major fault), so a file whose pages cannot all stay "
    "cached is read again at every pass over it",
    "for a mapping read whole, MAP_POPULATE or madvise(MADV_WILLNEED) (MADV_SEQUENTIAL for one read in order) "
    "reads it ahead in large pieces; keep what is read again within the memory its pages can stay cached in")
# A tree that starts programs: their executables and shared libraries are mapped files too, faulted in
# at every start. From MIN_STARTED programs exec'd beside the command, with most of the page faults'
# sampled time (RESTARTED_SHARE) in programs started more than once, the file kinds say so and put
# fewer starts first. `check -- make -j2` of 13 C files (46 programs, cc1 70% of the fault time): 43-50%
# of its fault samples file-backed, and the only advice was to keep a data file mapped across uses.
RESTARTED_SHARE = 0.5
STARTS = {
    "file-backed": (
        "; a program's executable and shared libraries are mapped files too: every start of a program faults in "
        "again the pages of them it runs or reads (from the page cache, or the disk)",
        "where they are the starts of the programs the evidence names: start fewer of them (one process that handles many "
        "inputs instead of one per input), or link them statically (fewer libraries to map at each start); where "
        "they are in a data file a program maps: "),
    "private file copy": (
        "; a program's shared libraries are private file mappings too: every start of a program writes their "
        "relocated data (its GOT and data pages), a private copy of each page written",
        "where they are the starts of the programs the evidence names: start fewer of them (one process that handles many "
        "inputs instead of one per input), or link them statically (no libraries to relocate at each start); where "
        "they are in a data file a program maps privately: "),
}
# A kind the kernel chain shows but no entry above words (records/cpu_profile.UNNAMED_FAULT): said as
# unknown, at its size, with the handlers the chains show.
UNKNOWN = ("Page faults of a kind memsleuth does not name",
           "the kernel chains of these faults show handlers memsleuth has no words for (it does not know what "
           "they did), as shares of the faults whose chain shows a kind: {handlers}",
           "perf record -g on the program shows these kernel paths with their callers; memsleuth names no "
           "mechanism for them, so it gives no advice of its own")


def check(view: CellView) -> list[Finding]:
    sc = view.process
    kinds = view.fault_kind_shares()
    if sc is None or kinds is None or view.profile is None:
        return []
    split = view.kernel_split(sc)
    faults = split.cost("page-faults")
    p = view.profile
    resolved = sum(v for k, v in p.fault_kinds.items() if k in kinds)
    unshown = sum(v for k, v in p.fault_kinds.items() if k not in kinds)
    found = []
    unnamed = {k: v for k, v in kinds.items() if k.startswith(UNNAMED_FAULT)}
    words = dict(KINDS)
    if unnamed:
        handlers = ", ".join(f"{k[len(UNNAMED_FAULT):]} {v:.0%}"
                             for k, v in sorted(unnamed.items(), key=lambda kv: -kv[1]))
        words["unknown"] = (UNKNOWN[0], UNKNOWN[1].format(handlers=handlers), UNKNOWN[2])
        kinds = Counts({**{k: v for k, v in kinds.items() if k not in unnamed}, "unknown": sum(unnamed.values())})
    if "munmap" in sc.syscalls and sc.syscalls["munmap"] < KEPT_MAPPED_MUNMAPS:     # counted, and few
        words["file-backed"] = (KINDS["file-backed"][0], *FILE_KEPT_MAPPED)
    starts = _started_again(view)
    if starts is not None:
        for kind, (more, first) in STARTS.items():
            title, mechanism, advice = words[kind]
            words[kind] = (title, mechanism + more, first + advice)
    rt = user_time.runtime_running(view.cpu_stacks) if kinds["copy-on-write"] else None
    if rt is not None and rt.after_fork:    # the runtime's own writes to what the child shares, where it runs
        title, mechanism, advice = words["copy-on-write"]
        words["copy-on-write"] = (title, mechanism, f"{advice}; {rt.after_fork}")
    for kind, (title, mechanism, advice) in words.items():
        share = kinds[kind]
        spent = faults * share
        if not share or not split.material(spent):
            continue
        phase = view.phase(*(when_key(FAULT, k) for k in (unnamed if kind == "unknown" else (kind,))))
        others = ", ".join(f"{k} {s:.0%}" for k, s in sorted(kinds.items(), key=lambda kv: -kv[1]) if k != kind)
        found.append(Finding(
            id=kind.lower().replace(" ", "-").replace("_", "-") + "-faults",
            title=f"{title}: {split.describe(spent)}",
            mechanism=mechanism,
            evidence=[f"{share:.0%} of the {resolved:,} sampled page faults whose kernel chain shows what they did "
                      f"were {kind}" + (f" (the rest: {others})" if others else "") +
                      (f"; the {unshown:,} whose chain stops at the fault's entry are taken to be alike" if unshown else
                       ""),
                      f"the page faults took {split.describe(faults)}; this kind's part of it is {split.describe(spent)}"
                      " (analysis/cost.py)",
                      f"{sc.minflt:,.0f} page faults in the process tree"] +
                     ([starts] if starts is not None and kind in STARTS else []) + ([phase.text] if phase else []),
            advice=advice, subject=view.label, confidence=confidence_from_share(split.share(spent)),
            numbers={"kind": kind, "share_of_faults": share, "faults": sc.minflt},
            cost_ns=spent, cost_share=split.share(spent), phase=phase.name if phase else None))
    return found


def _started_again(view: CellView) -> str | None:
    """The evidence line that the tree's page faults are mostly in programs it starts again and again
    (at least MIN_STARTED programs exec'd beside the command, RESTARTED_SHARE of the faults' sampled
    time in programs started more than once), or None."""
    started = view.programs_started
    if started < MIN_STARTED:
        return None
    per_exe = view.fault_executables()
    again = [(name, n, share) for name, n, share in per_exe if n > 1]
    if sum(share for _, _, share in again) < RESTARTED_SHARE:
        return None
    return (f"{started:,} programs were exec'd beside the command; the page faults' sampled time by program: " +
            ", ".join(f"{name} ({n:,} process{'es' if n > 1 else ''}) {share:.0%}" for name, n, share in per_exe[:4]) +
            f"; {sum(share for _, _, share in again):.0%} in programs started more than once")
