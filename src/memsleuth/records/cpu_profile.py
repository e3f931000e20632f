"""Where the CPU time went, by kernel path: the explaining run's sampled CPU time (ms-run
`--cpu-sample-us`: the software cpu-clock on every thread of the tree, each sample with its kernel
call chain) read and classified. Pure: it reads the stored document, runs nothing.

Each sample is classified by how the kernel was entered, from its chain's frames (innermost
first): a fatal exit's teardown (do_exit), a system call by name (the `__x64_sys_NAME` frame, or
its other architectures' spellings), a page fault (the fault entry) and, within it, what the fault
did where the chain shows it (zero-fill of a small page, of a huge page, copy-on-write, a page of
shared memory, a file's page, swap-in), other kernel work (interrupts, softirqs: named by their innermost function), or
user mode (no kernel frame). A share is samples over samples, with a 95% Wilson interval: the
samples are taken at a fixed period of CPU time, so the share of samples estimates the share of
CPU time.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

from memsleuth.records import documents
from memsleuth.records.model import Counts

USER = "user"
FAULT = "page-faults"
EXIT = "exit (a task's end)"
EXEC = "exec"
OTHER = "other kernel"
UNNAMED_SYSCALL = "other system calls"
# A sample in the entry's own code (do_syscall_64, x64_sys_call innermost: the switch into the kernel,
# the mitigations on the way in and out, the dispatch) does not say which call it entered for. It is
# the time of the calls the same executable made: `read` shares these samples out among the calls its
# chains name, in their proportions (perf on a 4-thread program contending on glibc's arena lock,
# nothing traced: 8.5% of all samples innermost in do_syscall_64, nearly all its calls futex).
# Where an executable's chains name no call, they stay UNNAMED_SYSCALL.
# The syscall tracepoints' own work at a call's entry or exit, before the call is dispatched or
# after it returned (which call, the chain does not say): the explaining run's instrumentation
# (each call's arguments and stack taken), not the program's. The measured runs only count calls.
TRACING = "syscall tracing (memsleuth's own)"
_TRACING = {"perf_syscall_enter", "perf_syscall_exit", "syscall_trace_enter", "syscall_exit_work",
            "trace_sys_enter", "trace_sys_exit", "syscall_enter_from_user_mode_work"}
# memsleuth's call-site sampler (libmssites, preloaded in the explaining run) opens its perf events in
# each process it is loaded in, and again in each forked child: not the program's calls. `check --
# xargs -P2 ... md5sum` (400 short processes) put 10% of its explaining run's samples in
# perf_event_open, which the report named as the program's. Where the sample's executable mapped the
# sampler, its perf_event_open calls are this class; like TRACING, never shared out as the program's.
SAMPLER_OWN = "perf_event_open (memsleuth's sampler, in each process it is loaded in)"
SAMPLER_LIB = "libmssites"
# Starting a process: the fork-like calls (a thread's clone too: its chain shows no address-space
# copy) and exec. Within them, and in exit, what the chain shows of the address space's own work:
# fork copying the parent's page tables, exec or exit tearing an address space down.
SPAWN = ("clone", "clone3", "fork", "vfork", EXEC)
MM_COPY = frozenset({"dup_mmap", "copy_page_range"})
MM_TEARDOWN = frozenset({"exit_mmap", "unmap_vmas"})
# The paths that are memory work: what a report names even when small.
MEMORY_PATHS = (FAULT, EXIT, "mmap", "munmap", "madvise", "brk", "mremap", "mprotect")

# The syscall's own frame on x86-64 (__x64_sys_, __ia32_sys_ for 32-bit entries), arm64, riscv,
# s390, and the inner __do_sys_/__se_sys_ frames every architecture's wrapper calls.
_SYSCALL = re.compile(r"^__(?:x64|ia32|x32|arm64|riscv|s390x|s390|se|do)_(?:compat_)?sys_(\w+)$")
_SYSCALL_ENTRY = {"do_syscall_64", "entry_SYSCALL_64", "entry_SYSCALL_64_after_hwframe", "x64_sys_call",
                  "invoke_syscall", "el0_svc_common", "el0_svc", "do_el0_svc"}
# A syscall whose wrapper frames the compiler folded into the dispatcher (6.x's x64_sys_call inlines
# __x64_sys_mmap and ksys_mmap_pgoff: a sample in mmap reads vm_mmap_pgoff <- do_syscall_64): its
# body, the outermost frame inside the entry, names it. Only bodies that one syscall alone calls
# from the entry (vm_mmap_pgoff under a kernel's own vm_mmap is not directly under the entry).
_SYSCALL_BODIES = {"ksys_mmap_pgoff": "mmap", "vm_mmap_pgoff": "mmap", "__vm_munmap": "munmap",
                   "do_mprotect_pkey": "mprotect", "do_madvise": "madvise", "do_futex": "futex",
                   "do_brk_flags": "brk", "do_sys_openat2": "openat", "ksys_fadvise64_64": "fadvise64",
                   "do_epoll_wait": "epoll_wait", "do_pipe2": "pipe2"}
# Any other body the kernel names as a syscall's own: ksys_write, ksys_read, __sys_sendto, do_sys_poll
# (6.x's dispatcher calls them straight from do_syscall_64 where __x64_sys_write was inlined away).
_SYSCALL_BODY = re.compile(r"^(?:ksys|__sys|do_sys)_(\w+)$")
_FAULT_ENTRY = {"asm_exc_page_fault", "exc_page_fault", "do_user_addr_fault", "handle_mm_fault",
                "__handle_mm_fault", "do_page_fault", "do_mem_abort", "do_translation_fault", "el0_da",
                "handle_page_fault", "__do_page_fault", "do_kern_addr_fault"}
# The exception entry of a fault (the CPU's own, not a kernel's call into the fault path as
# get_user_pages makes it for MAP_POPULATE or MADV_POPULATE_WRITE, which stays the call's).
_EXCEPTION_ENTRY = {"asm_exc_page_fault", "exc_page_fault", "do_user_addr_fault", "do_page_fault", "__do_page_fault",
                    "do_mem_abort", "do_translation_fault", "el1_abort", "el0_da"}
# The generic fault path that dispatches to a kind's handler: the handler is the frame it called.
_DISPATCH = ("handle_pte_fault", "do_pte_missing", "__handle_mm_fault", "handle_mm_fault", "hugetlb_fault")
# Functions of every fault named like a handler that are not one (accounting, reclaim's hooks).
_NOT_HANDLERS = {"mm_account_fault", "lru_gen_enter_fault", "lru_gen_exit_fault", "handle_pte_fault",
                 "might_fault", "__might_fault"}
_EXIT = {"do_exit", "do_group_exit"}
# A fault on a file's or on shared memory's pages whose chain shows only their common path: shared out
# between the two kinds in the proportions of the samples whose chain tells them apart (a file's
# where none does: a mapping whose pages are all in the page cache is mapped around the fault).
FILE_OR_SHARED = "file or shared memory"
# The first write to a page of a private file mapping copies the file's page (do_cow_fault). 6.x
# inlines do_cow_fault into do_fault: its work, directly under do_fault, is the copy or the private
# page it allocates and charges (a read fault or a shared one allocates no page of its own there).
PRIVATE_FILE_COPY = "private file copy"
SHARED_FILE_WRITE = "shared file write"
SHARED_FILE_WRITE_SUFFIX = "_page_mkwrite"
# A write-protect fault whose chain shows only do_wp_page's own code: a copy-on-write's or a shared
# file page's dirtying alike (6.x inlines wp_page_shared into it).
WRITE_PROTECT = "write-protect"
# A path two kinds share, and the kinds it is shared out to (the first where the chains name neither).
COMMON_PATHS = ((FILE_OR_SHARED, ("file-backed", "shared memory")),
                (WRITE_PROTECT, ("copy-on-write", SHARED_FILE_WRITE)))
_COW_FAULT_WORK = frozenset({"copy_mc_enhanced_fast_string", "copy_mc_to_kernel", "copy_mc_user_highpage",
                             "copy_user_highpage", "copy_page", "copy_mc_fragile", "vma_alloc_folio_noprof",
                             "vma_alloc_folio", "folio_prealloc", "alloc_pages_mpol", "alloc_pages_mpol_noprof",
                             "__anon_vma_prepare", "anon_vma_prepare", "__mem_cgroup_charge", "mem_cgroup_charge"})
# What a fault did, from the frames below its entry; the first set that matches names it.
FAULT_KINDS: tuple[tuple[str, frozenset[str]], ...] = (
    # NUMA balancing's hinting faults (the page was unmapped to see which node touches it) and the
    # migration they start; hugetlbfs's own fault path (MAP_HUGETLB, its copy-on-write included); a
    # fault resolved by a userfaultfd handler in user space.
    # The fault's page could not be charged to the memory cgroup the process runs in (a container's,
    # a unit's or a job's limit) until the group reclaimed pages of its own: the group's limit, however
    # much memory the machine has free (before the machine-wide kind, whose shrink_node it shares).
    ("memory-limit reclaim", frozenset({"try_to_free_mem_cgroup_pages", "mem_cgroup_handle_over_high",
                                        "reclaim_high"})),
    # The allocation inside the fault found too little free memory (or, for a huge page, too little
    # contiguous memory) and reclaimed or compacted it itself: memory pressure, whatever the fault was.
    ("direct reclaim or compaction", frozenset({"__alloc_pages_direct_reclaim", "try_to_free_pages",
                                                "__alloc_pages_direct_compact", "try_to_compact_pages",
                                                "shrink_node", "do_try_to_free_pages", "compact_zone"})),
    ("NUMA hinting", frozenset({"do_numa_page", "do_huge_pmd_numa_page", "migrate_misplaced_folio",
                                "migrate_misplaced_page", "numa_migrate_check", "task_numa_fault"})),
    ("hugetlbfs", frozenset({"hugetlb_fault", "hugetlb_no_page", "hugetlb_wp", "hugetlb_handle_userfault"})),
    ("userfaultfd", frozenset({"handle_userfault"})),
    ("huge-page zero-fill", frozenset({"do_huge_pmd_anonymous_page", "__do_huge_pmd_anonymous_page",
                                       "clear_huge_page", "folio_zero_user", "vmf_anon_prepare_huge"})),
    # A write to a private file mapping (MAP_PRIVATE): the file's page copied into a private one.
    (PRIVATE_FILE_COPY, frozenset({"do_cow_fault"})),
    # A write to a clean page of a MAP_SHARED file mapping: the page is mapped read-only until written
    # (again after each writeback), and the file system makes it writable and dirty (page_mkwrite).
    # Before copy-on-write, whose do_wp_page its write-protect faults go through without a copy.
    # Each file system names its own page_mkwrite (ext4_, xfs_filemap_, btrfs_, iomap_, block_...):
    # SHARED_FILE_WRITE_SUFFIX matches them; fault_dirty_shared_page under do_wp_page is its too.
    (SHARED_FILE_WRITE, frozenset({"do_page_mkwrite", "wp_page_shared", "wp_pfn_shared", "finish_mkwrite_fault",
                                   "filemap_page_mkwrite", "block_page_mkwrite", "iomap_page_mkwrite"})),
    ("copy-on-write", frozenset({"wp_page_copy", "do_huge_pmd_wp_page"})),
    # The write-protect fault's own path, a copy's and a shared file page's alike (read() shares it out).
    (WRITE_PROTECT, frozenset({"do_wp_page", "wp_page_reuse"})),
    ("swap-in", frozenset({"do_swap_page", "swap_readpage", "swap_read_folio"})),
    # Shared anonymous memory, a memfd, tmpfs, /dev/shm: shmem's pages (before file-backed, whose
    # generic fault frames its chain also shows): allocated and zeroed, never read from a file.
    ("shared memory", frozenset({"shmem_fault", "shmem_get_folio_gfp", "shmem_alloc_and_add_folio",
                                 "shmem_alloc_folio", "shmem_get_folio", "shmem_getpage_gfp"})),
    ("file-backed", frozenset({"filemap_fault", "filemap_read_folio", "page_cache_ra_unbounded",
                               "page_cache_ra_order", "page_cache_sync_ra", "page_cache_async_ra",
                               "do_sync_mmap_readahead", "do_async_mmap_readahead"})),
    # The generic path of a fault on a shared or file mapping (mapping cached pages around it, installing
    # the page, dirtying it): a file's or shared memory's alike. read() shares these out (COMMON_PATHS).
    (FILE_OR_SHARED, frozenset({"do_read_fault", "do_shared_fault", "filemap_map_pages", "__do_fault",
                                "do_fault_around", "do_fault", "finish_fault", "fault_dirty_shared_page"})),
    ("small-page zero-fill", frozenset({"do_anonymous_page", "alloc_anon_folio"})),
    # Waiting for the process's memory-map lock, held for writing by another thread's mmap, munmap
    # or mprotect (the fault takes it for reading before it can do anything): contention, not
    # work. Last, so a lock a kind's own handler waits for (a file's invalidate_lock in
    # filemap_fault) stays that kind's.
    ("mmap_lock wait", frozenset({"rwsem_down_read_slowpath", "rwsem_optimistic_spin", "osq_lock",
                                  "rwsem_spin_on_owner", "__down_read_common"})),
)
UNRESOLVED_FAULT = "path not sampled"
# A fault whose chain shows a handler of a kind no set above names (a kernel's new path, or one
# memsleuth has no words for): its kind is "unnamed: FUNCTION", said as unknown, never handed to the
# nearest kind. A handler is a function named like the kernel's fault paths, below the entry.
UNNAMED_FAULT = "unnamed: "
_HANDLER = re.compile(r"^(do_\w+_(page|fault)|\w+_fault|\w+_page_fault)$")
# What gave back (or mapped) the address of the thread's last traced fault before a sample, as
# ms-run numbers it in a stack (its fifth member): the fault samples' time by cause.
RELEASES = ("unknown", "none", "munmap", "madvise", "brk", "mapped")
Z95 = 1.959963984540054


def _unnamed_handler(frames: list[str]) -> str | None:
    """UNNAMED_FAULT + the handler the generic fault path called (the frame inward of the innermost
    dispatcher), where it is named like one; None where the chain stops in the generic path."""
    at = next((i for i, f in enumerate(frames) if f in _DISPATCH), None)
    if not at:
        return None
    callee = frames[at - 1]
    ok = callee not in _NOT_HANDLERS and callee not in _FAULT_ENTRY and _HANDLER.match(callee)
    return UNNAMED_FAULT + callee if ok else None


def classify(frames: list[str]) -> tuple[str, str | None]:
    """(class, detail) of one sample's kernel chain, innermost frame first: the class is USER,
    EXIT, EXEC, a syscall's name, TRACING, UNNAMED_SYSCALL, FAULT or OTHER; the detail is the fault's kind
    (FAULT_KINDS, or UNRESOLVED_FAULT where the chain stops at the fault's entry) or, for OTHER,
    the innermost function."""
    if not frames:
        return USER, None
    names = set(frames)
    if names & _EXIT:
        return EXIT, None
    # A page fault taken inside a system call (read() copying into a buffer never written before,
    # recv, a copy_to_user of any call): the fault's work, counted as a fault (the fault counters count
    # it), its kind from the frames inside its entry, not the call's.
    entry = max((i for i, f in enumerate(frames) if f in _EXCEPTION_ENTRY), default=None)
    if entry is not None and any(_SYSCALL.match(f) or f in _SYSCALL_ENTRY for f in frames[entry + 1:]):
        return _fault(frames[:entry + 1])
    for name in reversed(frames):             # the outermost syscall frame is the call made
        m = _SYSCALL.match(name)
        if m:
            call = m.group(1)
            if call in ("execve", "execveat"):
                return EXEC, None
            if call in ("exit", "exit_group"):
                return EXIT, None
            return call, None
    if names & _SYSCALL_ENTRY and names & _TRACING:
        return TRACING, None
    if names & _SYSCALL_ENTRY:
        # the outermost frame inside the entry (the chain ends at the entry's frames)
        body = next((f for f in reversed(frames) if f not in _SYSCALL_ENTRY), None)
        if body is not None and frames[-1] in _SYSCALL_ENTRY:
            if body in _SYSCALL_BODIES:
                return _SYSCALL_BODIES[body], None
            if (m := _SYSCALL_BODY.match(body)) is not None:
                return m.group(1), None
        return UNNAMED_SYSCALL, None
    if names & _FAULT_ENTRY:
        return _fault(frames)
    return OTHER, frames[0]


def _fault(frames: list[str]) -> tuple[str, str]:
    """(FAULT, its kind) of a fault's chain, from its frames."""
    names = set(frames)
    at = frames.index("do_fault") if "do_fault" in names else 0
    inlined_cow = bool(at) and frames[at - 1] in _COW_FAULT_WORK
    # a write-protect fault that dirties a shared file's page (wp_page_shared, inlined into do_wp_page)
    dirtying = any(f.endswith(SHARED_FILE_WRITE_SUFFIX) for f in frames) or \
        ("do_wp_page" in names and "fault_dirty_shared_page" in names)
    for kind, marks in FAULT_KINDS:
        if names & marks or (kind == PRIVATE_FILE_COPY and inlined_cow) or (kind == SHARED_FILE_WRITE and dirtying):
            return FAULT, kind
    return FAULT, _unnamed_handler(frames) or UNRESOLVED_FAULT


def poisson(k: float, z: float = Z95) -> tuple[float, float]:
    """The 95% interval of a Poisson count k (Wilson-Hilferty's normal approximation on its square
    root: good to a few percent from k = 5 on)."""
    if k <= 0:
        return 0.0, z * z
    r = math.sqrt(k)
    return max(0.0, r - z / 2) ** 2, (r + z / 2) ** 2


def wilson(k: float, n: float, z: float = Z95) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion k/n (0 <= k <= n)."""
    if n <= 0:
        return 0.0, 1.0
    p = min(max(k / n, 0.0), 1.0)
    d = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, mid - half), min(1.0, mid + half)


@dataclass(frozen=True)
class Profile:
    """A run's sampled CPU time by class (counts of samples), as `classify` names them."""
    period_ns: int
    samples: int
    counts: Counts
    fault_kinds: Counts = field(default_factory=Counts)
    other_top: tuple[tuple[str, int], ...] = ()          # OTHER samples by innermost function
    executables: tuple[tuple[str, int, int], ...] = ()   # (name, samples, processes)
    # Per preloaded library (as the kernel named its mapping): (executable, its samples, processes
    # that exec'd it, of those the ones whose image mapped the library), for every executable exec'd.
    preloads: dict[str, tuple[tuple[str, int, int, int], ...]] = field(default_factory=dict)
    by_executable: dict[str, Counts] = field(default_factory=dict)
    fault_release: Counts = field(default_factory=Counts)   # FAULT samples by RELEASES
    # Samples of SPAWN and EXIT whose chain shows the address space copied ("copy": MM_COPY) or torn
    # down (MM_TEARDOWN: "teardown in exec", "teardown in exit", "teardown in fork").
    address_space: Counts = field(default_factory=Counts)
    lost: int = 0
    why: str = ""
    # When the samples were taken: per key (`when_key`), its samples in buckets of `when_bucket_ns`
    # from the run's first record (ms-run's native/launcher/msr_when.h), over `when_span_ns`; empty where
    # the document has no times (an older ms-run).
    when: dict[str, tuple[int, ...]] = field(default_factory=dict)
    when_bucket_ns: int = 0
    when_span_ns: int = 0

    def __post_init__(self) -> None:
        for name in ("counts", "fault_kinds", "fault_release", "address_space"):   # a name not sampled reads 0
            object.__setattr__(self, name, Counts(getattr(self, name)))
        object.__setattr__(self, "by_executable", {k: Counts(v) for k, v in self.by_executable.items()})

    @property
    def kernel_samples(self) -> int:
        return self.samples - self.counts[USER]

    def share(self, *classes: str) -> float:
        return sum(self.counts[c] for c in classes) / self.samples if self.samples else 0.0

    def interval(self, share: float) -> tuple[float, float]:
        """The 95% interval of a share of these samples (a class or a sum of classes)."""
        return wilson(share * self.samples, self.samples)

    @property
    def usable(self) -> bool:
        """Enough samples, with kernel frames named, to cost a mechanism by: at least MIN_SAMPLES,
        and not a profile whose kernel chains could not be read or named."""
        return self.samples >= MIN_SAMPLES and not self.why

    def to_dict(self) -> dict:
        return {"period_ns": self.period_ns, "samples": self.samples, "counts": dict(self.counts),
                "fault_kinds": dict(self.fault_kinds), "other_top": [list(t) for t in self.other_top],
                "executables": [list(e) for e in self.executables], "by_executable": self.by_executable,
                "preloads": {k: [list(e) for e in v] for k, v in self.preloads.items()},
                "fault_release": dict(self.fault_release), "address_space": dict(self.address_space),
                "when": {k: list(v) for k, v in self.when.items()}, "when_bucket_ns": self.when_bucket_ns,
                "when_span_ns": self.when_span_ns, "lost_records": self.lost, "why": self.why}


def _share_out_common_paths(kinds: Counter, when: dict[str, list[int]]) -> None:
    """Each COMMON_PATHS path's samples given to its two kinds in the proportions of those the chains
    name (all to the first where neither is named); their times to the larger."""
    for path, (first, second) in COMMON_PATHS:
        common = kinds.pop(path, 0)
        times = when.pop(when_key(FAULT, path), None)
        if not common:
            continue
        a, b = kinds[first], kinds[second]
        to_second = round(common * b / (a + b)) if a + b else 0
        if to_second:
            kinds[second] += to_second
        if common - to_second:
            kinds[first] += common - to_second
        if times:
            documents.add_buckets(when.setdefault(when_key(FAULT, second if b > a else first), []),
                                  [x for k, n in enumerate(times) for x in (k, n)])


# Classes that are no system call's own (the entries are shared out among the others).
_NOT_CALLS = frozenset({USER, FAULT, EXIT, EXEC, OTHER, TRACING, UNNAMED_SYSCALL})


def _share_out_entries(by_exe: dict[str, Counter], when: dict[str, list[int]]) -> Counter:
    """Each executable's UNNAMED_SYSCALL samples given to the calls its chains name, in their
    proportions (largest remainders, so the samples add up); where all were given, their times to the
    call that got the most. Returns the counts of all the executables together."""
    total: Counter = Counter()
    got: Counter = Counter()
    for by in by_exe.values():
        entries = by[UNNAMED_SYSCALL]
        calls = {k: v for k, v in by.items() if k not in _NOT_CALLS and v > 0}
        named = sum(calls.values())
        if entries and named:
            exact = {k: entries * v / named for k, v in calls.items()}
            given = {k: int(x) for k, x in exact.items()}
            for k in sorted(exact, key=lambda k: given[k] - exact[k])[:entries - sum(given.values())]:
                given[k] += 1
            for k, n in given.items():
                by[k] += n
            got.update(given)
            del by[UNNAMED_SYSCALL]
        total.update(by)
    times = when.pop(UNNAMED_SYSCALL, None)
    if times and got:
        if total[UNNAMED_SYSCALL]:
            got[UNNAMED_SYSCALL] = total[UNNAMED_SYSCALL]
        for k, row in _apportion(times, got).items():
            documents.add_buckets(when.setdefault(k, []), [x for i, n in enumerate(row) for x in (i, n)])
    elif times:
        when[UNNAMED_SYSCALL] = times
    return total


def _apportion(times: list[int], shares: Counter) -> dict[str, list[int]]:
    """Samples by bucket of time (`times`) dealt out to keys, each key getting exactly its count in
    `shares` (which add up to the samples), in time order so that each key's samples spread as the
    whole's do."""
    n = sum(shares.values())
    dealt: Counter = Counter()
    out: dict[str, list[int]] = {k: [0] * len(times) for k in shares}
    j = 0
    for b, k in enumerate(times):
        for _ in range(k):
            j += 1
            key = max(shares, key=lambda x: shares[x] * j / n - dealt[x])
            dealt[key] += 1
            out[key][b] += 1
    return out


def when_key(cls: str, detail: str | None = None, release: str | None = None) -> str:
    """The key of a set of samples in Profile.when: a class (\"munmap\"), a fault kind
    (\"page-faults:copy-on-write\") or the faults by what released their address (\"page-faults@munmap\")."""
    return f"{cls}:{detail}" if detail else f"{cls}@{release}" if release else cls


# Below this many samples a share's interval is wider than ±10 points at 50%: no cost is read
# from so few (the estimate from counts stands, labelled as such).
MIN_SAMPLES = 100
# The fields `read` takes from ms-run's cpu_profile document, with their values where it lacks them.
PROFILE_DEFAULTS = {"frames": [], "executables": [], "preload": [], "stacks": [], "samples": 0, "cut_stacks": 0,
                    "why": "", "period_ns": 0, "when_bucket_ns": 0, "when_span_ns": 0, "lost_records": 0}


def read(doc: dict | None) -> Profile | None:
    """The profile of one explaining run's document (`cpu_profile`), or None when there is none or
    it is not what ms-run writes."""
    if not isinstance(doc, dict):
        return None
    doc = documents.with_defaults(doc, PROFILE_DEFAULTS)
    try:
        frames = [str(f) for f in doc["frames"]]
        raw_exes = doc["executables"]
        exes = [(str(e[0]), int(e[1]), int(e[2])) for e in raw_exes]
        paths = [str(p) for p in doc["preload"]]
        preloads = {path: tuple((str(e[0]), int(e[1]), int(e[3]), int(e[4][i])) for e in raw_exes
                                if len(e) > 4 and int(e[3]) > 0)
                    for i, path in enumerate(paths)}
        counts: Counter = Counter()
        kinds: Counter = Counter()
        other: Counter = Counter()
        by_exe: dict[str, Counter] = {}
        release: Counter = Counter()
        space: Counter = Counter()
        when: dict[str, list[int]] = {}

        def at(key: str, pairs) -> None:
            documents.add_buckets(when.setdefault(key, []), pairs)

        sampler = [i for i, path in enumerate(paths) if SAMPLER_LIB in path]
        with_sampler = {x for x, e in enumerate(raw_exes) if len(e) > 4 and any(int(e[4][i]) > 0 for i in sampler)}
        for exe, n, _elided, idx, *rest in doc["stacks"]:
            n = int(n)
            names = [frames[int(i)] for i in idx]
            cls, detail = classify(names)
            if cls == "perf_event_open" and int(exe) in with_sampler:
                cls = SAMPLER_OWN
            counts[cls] += n
            pairs = rest[1] if len(rest) > 1 else []
            at(cls, pairs)
            if cls == FAULT:
                kinds[detail] += n
                r = int(rest[0]) if rest else 0
                cause = RELEASES[r] if 0 <= r < len(RELEASES) else "unknown"
                release[cause] += n
                at(when_key(cls, detail), pairs)
                at(when_key(cls, release=cause), pairs)
            elif cls == OTHER:
                other[detail] += n
            elif cls in SPAWN or cls == EXIT:
                seen = set(names)
                if seen & MM_COPY:
                    space["copy"] += n
                elif seen & MM_TEARDOWN:
                    space["teardown in " + ("exit" if cls == EXIT else "exec" if cls == EXEC else "fork")] += n
            name = exes[int(exe)][0] if 0 <= int(exe) < len(exes) else "?"
            by_exe.setdefault(name, Counter())[cls] += n
        _share_out_common_paths(kinds, when)
        counts = _share_out_entries(by_exe, when)
        total = int(doc["samples"])
        cut = int(doc["cut_stacks"])
        if cut:
            counts[OTHER] += cut        # stacks beyond ms-run's table: counted, not classified
            other["(stacks not kept)"] += cut
        why = str(doc["why"])
        if not why and frames and all(f.startswith("0x") for f in frames):
            why = "kernel frames unnamed"
        return Profile(period_ns=int(doc["period_ns"]), samples=total, counts=counts,
                       fault_kinds=kinds, other_top=tuple(other.most_common(8)), executables=tuple(exes),
                       preloads=preloads, by_executable=by_exe, fault_release=release, address_space=space,
                       when={k: tuple(v) for k, v in when.items() if any(v)},
                       when_bucket_ns=int(doc["when_bucket_ns"]), when_span_ns=int(doc["when_span_ns"]),
                       lost=int(doc["lost_records"]), why=why)
    except (TypeError, ValueError, IndexError, KeyError):
        return None


