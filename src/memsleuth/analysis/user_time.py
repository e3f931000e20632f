"""Who ran the CPU time, from the user chains of the explaining run's CPU samples
(records/cpu_stacks.py): each sample goes to exactly one part, by mode and frames:

- in the kernel: the kernel's (what it did there is the kernel-chain profile's account,
  records/cpu_profile.py, and the fault and system-call findings');
- in user mode, a chain with a frame of a runtime's garbage collector (runtimes.TABLE's `gc`):
  that collector's;
- in user mode, a chain with a frame of a runtime growing a thread's stack by copying it (`stack_growth`:
  Go's morestack, newstack, copystack): that runtime's stack growth;
- in user mode, innermost in malloc, free and their internals (ALLOCATOR_FRAMES): the allocator's;
- in user mode, innermost in memsleuth's own preloads (the explaining run's heap accounting and
  call-site sampler, its wrappers of malloc and free included): memsleuth's own, nobody's cost;
- in user mode, any other chain: the program's and its libraries' own work, including the frames
  memsleuth could not name.

A share is samples over all the samples, with its 95% Wilson interval (records/cpu_profile.wilson):
the cpu-clock fires at a fixed period of CPU time on every thread, so the share of samples
estimates the share of CPU time. The two samplers of the explaining run are separate events at the
same period: a collector's share (user mode) and a kernel mechanism's (kernel mode) count disjoint
samples, so they never add up past the whole.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from memsleuth.analysis import phase, runtimes
from memsleuth.records.cpu_profile import wilson
from memsleuth.records.cpu_stacks import OWN, CpuStacks

# Below this many samples in all, no share is read (as cpu_profile.MIN_SAMPLES).
MIN_SAMPLES = 100


class _Part:
    """A part of the samples: its `samples` over the `total` they are read against, and that share's
    95% Wilson interval."""
    samples: int
    total: int

    @property
    def share(self) -> float:
        return self.samples / self.total if self.total else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.samples, self.total)


@dataclass(frozen=True)
class Collector(_Part):
    """One runtime's garbage collector in the samples."""
    runtime: runtimes.Runtime
    samples: int                 # user-mode samples whose chain has a frame of its collector
    kernel_samples: int          # kernel-mode samples entered from its collector's code
    total: int                   # all the CPU samples
    functions: tuple[tuple[str, int], ...]    # per sample its collector frame nearest the sampled code, the most first
    executables: tuple[tuple[str, int], ...]  # the executables whose threads ran it
    when: tuple[int, ...] = ()   # its user-mode samples by bucket of time (CpuStacks.when_bucket_ns)

    @property
    def kernel_share(self) -> float:
        return self.kernel_samples / self.total if self.total else 0.0


def _collector_of(functions: tuple[str, ...]) -> tuple[runtimes.Runtime, str] | None:
    """The runtime whose collector's frame is in the chain, and its innermost such frame."""
    for fn in functions:
        for rt in runtimes.TABLE:
            if rt.gc is not None and rt.gc.search(fn):
                return rt, fn
    return None


def collectors(stacks: CpuStacks | None) -> list[Collector]:
    """Each runtime's collector found in the samples, the most sampled first; empty with too few
    samples to read a share from."""
    if stacks is None or stacks.samples < MIN_SAMPLES:
        return []
    user: Counter = Counter()
    kernel: Counter = Counter()
    fns: dict[str, Counter] = {}
    exes: dict[str, Counter] = {}
    when: dict[str, list[tuple[int, ...]]] = {}
    by_name = {}
    for st in stacks.stacks:
        found = _collector_of(st.functions)
        if found is None:
            continue
        rt, fn = found
        by_name[rt.name] = rt
        if st.in_kernel:
            kernel[rt.name] += st.samples
            continue
        user[rt.name] += st.samples
        fns.setdefault(rt.name, Counter())[fn] += st.samples
        exes.setdefault(rt.name, Counter())[st.executable] += st.samples
        when.setdefault(rt.name, []).append(st.when)
    out = [Collector(by_name[name], user[name], kernel[name], stacks.samples,
                     tuple(fns.get(name, Counter()).most_common(5)), tuple(exes.get(name, Counter()).most_common(3)),
                     tuple(phase.sum_buckets(when.get(name, ()))))
           for name in by_name]
    return sorted(out, key=lambda c: -c.samples)


def _growing_stack(functions: tuple[str, ...]) -> runtimes.Runtime | None:
    """The runtime growing a thread's stack in this chain (a frame of its `stack_growth`, none of its
    `not_growth`: the same entry preempting the goroutine or shrinking its stack)."""
    for rt in runtimes.TABLE:
        if rt.stack_growth is not None and any(rt.stack_growth.search(fn) for fn in functions):
            if rt.not_growth is not None and any(rt.not_growth.search(fn) for fn in functions):
                return None
            return rt
    return None


@dataclass(frozen=True)
class StackGrowth(_Part):
    """One runtime growing its threads' stacks by copying them, in the samples."""
    runtime: runtimes.Runtime
    samples: int                 # user-mode samples with a frame of its stack growth, outside its collector
    total: int                   # all the CPU samples
    functions: tuple[tuple[str, int], ...]   # the sampled (innermost) function, the most first
    callers: tuple[tuple[str, int], ...]     # the first frame outside the runtime below the growth: whose call grew it
    when: tuple[int, ...] = ()


def stack_growth(stacks: CpuStacks | None) -> list[StackGrowth]:
    """Each runtime's stack growth found in the samples (user mode, not the collector's), the most first;
    empty with too few samples to read a share from."""
    if stacks is None or stacks.samples < MIN_SAMPLES:
        return []
    hits: Counter = Counter()
    fns: dict[str, Counter] = {}
    callers: dict[str, Counter] = {}
    when: dict[str, list] = {}
    by_name = {}
    for st in stacks.stacks:
        if st.in_kernel or _collector_of(st.functions) is not None:
            continue
        rt = _growing_stack(st.functions)
        if rt is None:
            continue
        by_name[rt.name] = rt
        hits[rt.name] += st.samples
        fns.setdefault(rt.name, Counter())[st.functions[0]] += st.samples
        # outward from the growth's outermost frame: the first function that is not the runtime's own
        last = max(i for i, fn in enumerate(st.functions) if rt.stack_growth.search(fn))
        caller = next((fn for fn in st.functions[last + 1:] if not rt.frames.search(fn)), "(no caller named)")
        callers.setdefault(rt.name, Counter())[caller] += st.samples
        when.setdefault(rt.name, []).append(st.when)
    return [StackGrowth(by_name[k], n, stacks.samples, tuple(fns[k].most_common(5)), tuple(callers[k].most_common(3)),
                        tuple(phase.sum_buckets(when[k])))
            for k, n in hits.most_common()]


# The allocator's own code, as a sample's innermost frame names it: malloc and free and their
# internals in glibc, jemalloc (je_), mimalloc (mi_) and tcmalloc, C++'s operator new and delete and
# Rust's global-allocator shims (thin wrappers over them). A runtime's own allocator (CPython's
# obmalloc, Go's mallocgc) is not malloc and is not here.
ALLOCATOR_FRAMES = re.compile(
    r"^(malloc|free|cfree|calloc|realloc|reallocarray|memalign|posix_memalign|aligned_alloc|valloc|pvalloc|"
    r"__libc_(malloc|free|calloc|realloc|memalign)|_int_(malloc|free|realloc|memalign)|_int_free_\w+|"
    r"malloc_consolidate|sysmalloc|unlink_chunk|tcache_\w+|_mid_memalign|arena_get2|"
    r"operator (new|delete)(\[\])?\b.*|je_\w+|_rjem_\w+|_?mi_\w+|tc_\w+|tcmalloc::.*|TCMalloc\w*::.*|"
    r"__rust_(alloc|dealloc|realloc|alloc_zeroed)|__rdl_\w+|__rg_\w+|<.+ as core::alloc::global::GlobalAlloc>::\w+)$")


# libc's clearing of memory: innermost under an allocator's frame (calloc, mimalloc's and Rust's zeroed
# allocation, jemalloc's), it is that allocator clearing a block it hands out again (fresh pages from
# the kernel are zero already): the allocator's time, and said as clearing.
ZEROING_FRAMES = re.compile(r"^(__)?(memset|bzero|explicit_bzero)(_\w+)?$|^_?mi_memzero\w*$")


# libc's copying of memory: innermost under an allocator's frame, it is realloc moving a block it
# could not grow in place (glibc's _int_realloc, jemalloc's and mimalloc's realloc): the allocator's
# time, and said as copying.
COPYING_FRAMES = re.compile(r"^(__)?(memmove|memcpy|mempcpy)(_\w+)?$")


def _malloc_leaf(functions: tuple[str, ...]) -> str | None:
    """"clearing" where the sample is an allocator clearing the block it hands out (a ZEROING_FRAMES
    frame innermost), "copying" where it is one copying a block it moves (COPYING_FRAMES), called by
    one of the allocator's frames (ALLOCATOR_FRAMES); else None."""
    if len(functions) < 2 or not ALLOCATOR_FRAMES.match(functions[1]):
        return None
    return "clearing" if ZEROING_FRAMES.match(functions[0]) else \
        "copying" if COPYING_FRAMES.match(functions[0]) else None


def _malloc_own(f: str) -> bool:
    """A frame of malloc's own work: the allocator's, its clearing, memsleuth's wrappers of it."""
    return bool(ALLOCATOR_FRAMES.match(f) or ZEROING_FRAMES.match(f) or COPYING_FRAMES.match(f)) or f.startswith(OWN)


@dataclass(frozen=True)
class AllocatorTime(_Part):
    """The user-mode samples in an allocator's own code: malloc's (`runtime` None), or a runtime's own."""
    runtime: runtimes.Runtime | None
    samples: int
    total: int                   # the samples of the program (memsleuth's own left out)
    functions: tuple[tuple[str, int], ...]   # the innermost allocator frames, the most first
    callers: tuple[tuple[str, int], ...]     # the first frame outside the allocator, the most first
    when: tuple[int, ...] = ()
    wrapped: int = 0             # samples in memsleuth's heap accounting around malloc and free, left out
    zeroing: tuple[tuple[str, int], ...] = ()   # of `samples`, those clearing what the allocator hands out
                                                # (ZEROING_FRAMES, Runtime.zeroing), by innermost frame
    copying: tuple[tuple[str, int], ...] = ()   # of `samples`, those copying a block realloc moves
                                                # (COPYING_FRAMES), by innermost frame


def _runtime_allocator(functions: tuple[str, ...]) -> tuple[runtimes.Runtime, str] | None:
    """The runtime whose own allocator ran the sample: its innermost frames are the runtime's own
    code (`frames`) and one of them is its allocator's (`alloc`); and that frame. The innermost may
    also be its clearing of the new memory (`zeroing`: the JVM's is libc's memset)."""
    for rt in runtimes.TABLE:
        if rt.alloc is None:
            continue
        for i, fn in enumerate(functions):     # its own frames, innermost first, up to the first of its allocator's
            if rt.alloc.search(fn):
                return rt, fn
            if not (rt.frames.search(fn) or (i == 0 and rt.zeroing is not None and rt.zeroing.search(fn))):
                break
    return None


def allocator_time(stacks: CpuStacks | None) -> list[AllocatorTime]:
    """Each allocator's part of the samples, the largest first: malloc's (ALLOCATOR_FRAMES innermost)
    and each runtime's own (_runtime_allocator), in user mode and outside any collector's chain. The
    samples innermost in memsleuth's own preloads are no one's (left out of the whole too), its heap
    accounting's wrappers of malloc and free as well: counted as the allocator's, they made malloc's
    share 10.5% of a sqlite3 run's CPU time, 15.7% of a Lua script's and 7.2% of a Perl one's, where
    perf's innermost samples of the same programs alone read about 6.5%, 11.3% and 5.9%; left out,
    check read 6.6%, 11.3% and 5.0% on the same programs. Empty with too few samples to read a share from."""
    if stacks is None or stacks.samples < MIN_SAMPLES:
        return []
    own = 0
    hits: Counter = Counter()
    fns: dict[str, Counter] = {}
    callers: dict[str, Counter] = {}
    when: dict[str, list] = {}
    wrapped: Counter = Counter()
    zeroing: dict[str, Counter] = {}
    copying: dict[str, Counter] = {}
    by_name: dict[str, runtimes.Runtime | None] = {}
    for st in stacks.stacks:
        inner = st.functions[0] if st.functions else ""
        if inner.startswith(OWN):
            own += st.samples
            if not st.in_kernel and ALLOCATOR_FRAMES.match(inner[len(OWN):]):
                wrapped["malloc"] += st.samples
            continue
        if st.in_kernel or _collector_of(st.functions) is not None or _growing_stack(st.functions) is not None:
            continue        # the collector's, or a runtime growing a stack (its stackalloc is not an allocation)
        leaf = _malloc_leaf(st.functions)
        if ALLOCATOR_FRAMES.match(inner) or leaf:
            rt, fn, mine = None, st.functions[1] if leaf else inner, _malloc_own
        else:
            found = _runtime_allocator(st.functions)
            if found is None:
                continue
            (rt, fn), mine = found, (lambda r: lambda f: bool(r.frames.search(f) or r.alloc.search(f) or
                                                              (r.zeroing and r.zeroing.search(f))))(found[0])
        key = rt.name if rt else "malloc"
        by_name[key] = rt
        hits[key] += st.samples
        fns.setdefault(key, Counter())[fn] += st.samples
        if leaf == "clearing" or (rt is not None and rt.zeroing is not None and rt.zeroing.search(inner)):
            zeroing.setdefault(key, Counter())[inner] += st.samples
        elif leaf == "copying":
            copying.setdefault(key, Counter())[inner] += st.samples
        caller = next((f for f in st.functions if not mine(f)), None)
        callers.setdefault(key, Counter())[caller or "(no caller named)"] += st.samples
        when.setdefault(key, []).append(st.when)
    return [AllocatorTime(by_name[k], n, stacks.samples - own, tuple(fns[k].most_common(5)),
                          tuple(callers[k].most_common(3)), tuple(phase.sum_buckets(when[k])), wrapped[k],
                          tuple(zeroing.get(k, Counter()).most_common()), tuple(copying.get(k, Counter()).most_common()))
            for k, n in hits.most_common()]


def runtime_running(stacks: CpuStacks | None, share: float = 0.5) -> runtimes.Runtime | None:
    """The runtime whose own code is in the chains of at least `share` of the samples (a frame of it,
    its collector's or its allocator's, by name or by its objects: an interpreter's eval loop under
    everything its program does; a chain cut short where the build has no frame pointers still has
    the runtime's innermost frames), or None."""
    if stacks is None or stacks.samples < MIN_SAMPLES:
        return None
    for rt in runtimes.TABLE:
        own = [p for p in (rt.frames, rt.gc, rt.alloc) if p is not None]
        hit = sum(st.samples for st in stacks.stacks
                  if any(any(p.search(fn) for p in own) or
                         (rt.objects is not None and rt.objects.search(f"({fn.strip('[]')},")) for fn in st.functions))
        if hit >= share * stacks.samples:
            return rt
    return None


@dataclass(frozen=True)
class Part:
    name: str           # "the kernel", "<runtime>'s garbage collector", "the program and its libraries"
    samples: int
    share: float
    low: float
    high: float

    def to_dict(self) -> dict:
        return {"name": self.name, "samples": self.samples, "share": self.share, "ci_low": self.low,
                "ci_high": self.high}


def who_ran(stacks: CpuStacks | None) -> list[Part]:
    """Every sample in exactly one part (the module's docstring), the largest first; the samples
    ms-run or memsleuth did not keep are a part of their own ("not kept")."""
    if stacks is None or stacks.samples < MIN_SAMPLES:
        return []
    parts: Counter = Counter()
    for st in stacks.stacks:
        if st.in_kernel:
            parts["the kernel"] += st.samples
            continue
        found = _collector_of(st.functions)
        inner = st.functions[0] if st.functions else ""
        growing = None if found else _growing_stack(st.functions)
        own_alloc = None if found or growing or inner.startswith(OWN) else _runtime_allocator(st.functions)
        parts[f"{found[0].name}'s garbage collector" if found else
              f"{growing.name} growing {growing.stacks}" if growing else
              "the allocator (malloc and free)" if ALLOCATOR_FRAMES.match(inner) or _malloc_leaf(st.functions) else
              "memsleuth's own (heap accounting, call-site sampling)" if inner.startswith(OWN) else
              f"{own_alloc[0].name}'s own allocator" if own_alloc else
              "the program and its libraries"] += st.samples
    if stacks.cut:
        parts["not kept (too many distinct stacks)"] += stacks.cut
    n = stacks.samples
    return [Part(name, k, k / n, *wilson(k, n)) for name, k in parts.most_common()]
