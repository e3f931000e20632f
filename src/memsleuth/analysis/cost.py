"""What a mechanism costs in a run: the scope's kernel time split across its page faults and its
system calls, and the one materiality threshold every finding is held to.

Measured where it can be (`sampled`): the explaining run samples the CPU time of the whole process
tree with kernel call chains (cpu_profile.py); each kind of entry's sampled time over the explaining
run's own count of it is what one costs (a fault that zeroes a huge page, a munmap of 64 MiB), and
times the measured runs' count it is the part, quoted with its 95% interval. The explaining run's
instrumentation (the heap accounting, the call-site sampler) may slow the program's own code or
change how often it enters the kernel; a cost per event is neither. Otherwise estimated (`split`,
said so wherever it is quoted): each kind of kernel entry is estimated as its count times
its unit cost on this machine (`ms-calibrate`, measured at the start of every measuring session
and stored with the run's machine), plus, for the calls that give pages back, the pages they gave
back (the calls' own arguments) times the cost of releasing one page. When the estimates add up to
more than the kernel time the process really had (rusage), they are scaled down to it, so the
parts never claim more than was measured; what they do not cover is "other kernel time".
A cost is material when it is at least MATERIAL_SHARE of the scope's CPU time and MIN_COST_NS in
absolute terms; below that no finding speaks of it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from memsleuth.records import cpu_profile
from memsleuth.records.cpu_stacks import OWN
from memsleuth.records.model import Counts
from memsleuth.records.syscall_args import SyscallArgs
from memsleuth.events import SYSCALLS
from memsleuth.events import MATERIAL_SHARE, MIN_COST_NS  # noqa: F401 (the rules read them here)
from memsleuth.units import PAGE_BYTES

# Estimates may exceed the measured kernel time by up to this much before they are scaled down:
# the tick granularity of rusage's system time, two ticks of slack.
TICK_SLACK_NS = 8_000_000
# Confidence from the size of the cost (share of CPU time): a quarter and more is high, a tenth
# medium, anything material below that low. One step lower when the words rest on counts alone
# (no kernel-side arguments, no call sites to confirm them).
HIGH_SHARE = 0.25
MEDIUM_SHARE = 0.10
# Memory given back to the kernel (a trimmed heap top, an unmapped block) comes back when the page
# faults that follow account for at least this share of it: one threshold for every mechanism
# that gives memory back and faults it in again (heap_trim, mmap_churn, the alloc-churn case).
REFAULT_SHARE = 0.5


# MADV_* numbers (asm-generic/mman-common.h) as the kernel's tracepoint reports them, and the
# family each belongs to: what the call does to memory decides the words of a finding.
ADVICE_NAMES = {0: "NORMAL", 1: "RANDOM", 2: "SEQUENTIAL", 3: "WILLNEED", 4: "DONTNEED", 8: "FREE", 9: "REMOVE",
                10: "DONTFORK", 11: "DOFORK", 12: "MERGEABLE", 13: "UNMERGEABLE", 14: "HUGEPAGE", 15: "NOHUGEPAGE",
                16: "DONTDUMP", 17: "DODUMP", 18: "WIPEONFORK", 19: "KEEPONFORK", 20: "COLD", 21: "PAGEOUT",
                22: "POPULATE_READ", 23: "POPULATE_WRITE", 24: "DONTNEED_LOCKED", 25: "COLLAPSE"}
ADVICE_FAMILY = {4: "purge", 8: "purge", 9: "purge", 24: "purge",
                 3: "prefault", 22: "prefault", 23: "prefault",
                 12: "merge", 13: "merge",
                 20: "reclaim", 21: "reclaim",
                 14: "huge pages", 15: "huge pages", 25: "huge pages",
                 0: "hint", 1: "hint", 2: "hint", 10: "hint", 11: "hint", 16: "hint", 17: "hint", 18: "hint",
                 19: "hint"}


def advice_family(advice: int) -> str:
    """The family of a madvise advice value ("other" for one ADVICE_FAMILY does not know)."""
    return ADVICE_FAMILY.get(advice, "other")


# The families whose calls give pages back (their bytes are released pages in the split).
RELEASING = ("purge", "reclaim")


def released_in(syscall_args: SyscallArgs) -> float | None:
    """Bytes one run gave back to the kernel, from its recorded syscall arguments: munmap's
    lengths, the break's moves down, and madvise's releasing advice. None when not recorded, or
    when a call that releases memory could not be traced (its bytes are unknown, not zero)."""
    if not syscall_args or any(call in syscall_args.unsupported for call in ("munmap", "brk", "madvise")):
        return None
    total = 0.0
    for call, key in (("munmap", "bytes"), ("brk", "down_bytes")):
        args = syscall_args.of(call)
        total += (args.total(key) or 0.0) if args else 0.0
    madvise = syscall_args.of("madvise")
    for advice, (_, nbytes) in madvise.by_advice.items() if madvise else ():
        if advice_family(advice) in RELEASING:
            total += nbytes
    return total


@dataclass(frozen=True)
class UnitCosts:
    """ns per kernel entry of each kind on one machine (native/launcher/ms_calibrate.c)."""
    fault_ns: float
    release_page_ns: float
    syscall_ns: dict[str, float]
    measured: bool = True       # False: DEFAULT, for runs stored before the calibration existed
    # What counting one call on its syscall tracepoint adds to it, as the measured runs count them;
    # None where it was not measured (no tracepoints here, or a run stored before it was).
    count_ns: float | None = None

    @classmethod
    def from_dict(cls, d: dict | None) -> "UnitCosts | None":
        try:
            fault, release = float(d["fault_ns"]), float(d["release_page_ns"])
            calls = {str(k): float(v) for k, v in (d.get("syscall_ns") or {}).items()}
        except (KeyError, TypeError, ValueError):
            return None
        if not (0 < fault < 1e8 and 0 <= release < 1e8) or any(not 0 <= v < 1e8 for v in calls.values()):
            return None
        try:
            count = float(d["count_ns"]) if d.get("count_ns") is not None else None
        except (TypeError, ValueError):
            count = None
        return cls(fault, release, calls, count_ns=count if count is not None and 0 <= count < 1e8 else None)

    def syscall(self, name: str) -> float:
        return self.syscall_ns.get(name, DEFAULT.syscall_ns.get(name, 1000.0))


# ms-calibrate on this project's VM (Xeon, 2 vCPUs, kernel 6.18), 2026-11-23: the fallback for
# runs stored without a calibration of their own.
DEFAULT = UnitCosts(fault_ns=1200.0, release_page_ns=200.0,
                    syscall_ns={"mmap": 2000.0, "munmap": 2000.0, "brk": 1800.0, "madvise": 600.0,
                                "mprotect": 1700.0, "mremap": 2100.0, "futex": 250.0}, measured=False)


@dataclass
class Split:
    """A scope's kernel time split by kind of entry (ns, after scaling to the measured time)."""
    wall_ns: float
    cpu_ns: float
    sys_ns: float
    parts: Counts = field(default_factory=Counts)   # "page-faults", "brk", "munmap", ...
    scale: float = 1.0                                        # <= 1: estimates scaled down to sys_ns
    units: UnitCosts = DEFAULT
    upper_bound: bool = False   # the sizes were not recorded: page-releasing calls got the unexplained rest
    profile: cpu_profile.Profile | None = None   # the parts are sampled (`sampled`)
    samples_behind: dict[str, float] = field(default_factory=dict)   # per part, the samples it rests on
    # `sampled`: the kernel time of every class of the profile (the parts' and the rest's alike: clone,
    # exec, exit, other kernel work), the same shares of the same kernel time
    class_ns: Counts = field(default_factory=Counts)

    def cost(self, *kinds: str) -> float:
        return sum(self.parts[k] for k in kinds)

    def share(self, ns: float) -> float:
        """A cost as a share of the scope's CPU time (wall time for a scope with no CPU time)."""
        base = self.cpu_ns or self.wall_ns
        return ns / base if base else 0.0

    @property
    def other_ns(self) -> float:
        return max(0.0, self.sys_ns - sum(self.parts.values()))

    def interval(self, ns: float) -> tuple[float, float]:
        """The 95% interval of a sampled cost's share of the CPU time: a count of samples is
        Poisson, so a cost resting on k samples is known to about 1.96 / sqrt(k) of itself (k: the
        samples behind the parts, at their average time per sample)."""
        behind = sum(self.samples_behind.values())
        per = sum(self.parts.values()) / behind if behind else 0.0
        k = ns / per if per else 0.0
        if k <= 0:
            return 0.0, self.share(ns)
        lo, hi = cpu_profile.poisson(k)
        return self.share(ns) * lo / k, min(1.0, self.share(ns) * hi / k)

    def material(self, ns: float) -> bool:
        return material(ns, self.share(ns))

    def describe(self, ns: float) -> str:
        """'310 ms = 12% of the CPU time (sampled, 95% CI 10-14%)', or '(estimated from counts)' (the
        headline every time finding carries)."""
        share = self.share(ns)
        if self.profile is not None:
            return sampled_headline(ns, share, self.interval(ns))
        return f"{'up to ' if self.upper_bound else ''}{ms(ns)} ms = {pct(share)} of the CPU time (estimated from counts)"


def counting_ns(sc, units: UnitCosts | None) -> float | None:
    """What the measured runs' own counting of the scope's system calls cost it: each call counted
    on its tracepoint times what counting one adds (UnitCosts.count_ns); None where that was not
    measured."""
    if units is None or units.count_ns is None:
        return None
    return sum(n for n in sc.syscalls.values() if n) * units.count_ns


def material(ns: float, share: float) -> bool:
    """Whether a cost is material: at least MIN_COST_NS and MATERIAL_SHARE of the CPU time."""
    return ns >= MIN_COST_NS and share >= MATERIAL_SHARE


@dataclass(frozen=True)
class SampledPart:
    """Kernel paths' part of a scope's CPU time read from the explaining run's samples alone (paths
    the measured runs do not count: clone, exec, mlock): the samples, their share, its ns, and the
    headline every time finding carries."""
    samples: int
    share: float
    ns: float
    headline: str

    @property
    def material(self) -> bool:
        return self.samples >= cpu_profile.MIN_SAMPLES and material(self.ns, self.share)


def sampled_part(split: Split, classes, extra: int = 0) -> SampledPart:
    """The part of a sampled split's scope that the profile's samples in `classes` hold, with `extra`
    samples of exit a rule counts in it (threads ending, which the chains tell apart from a process's
    teardown): their kernel time in the split (`Split.class_ns`), so that these parts, the counted
    ones and the user-mode ones (`user_part`) are one account of the scope's CPU time."""
    p = split.profile
    if p is None:
        return SampledPart(0, 0.0, 0.0, sampled_headline(0.0, 0.0, (0.0, 0.0)))
    k = sum(p.counts[c] for c in classes)
    ns = sum(split.class_ns[c] for c in classes)
    exits = p.counts[cpu_profile.EXIT]
    if extra and exits:
        k += extra
        ns += split.class_ns[cpu_profile.EXIT] * extra / exits
    share = split.share(ns)
    lo, hi = cpu_profile.poisson(k) if k else (0.0, 0.0)
    interval = (share * lo / k, min(1.0, share * hi / k)) if k else (0.0, 0.0)
    return SampledPart(k, share, ns, sampled_headline(ns, share, interval))


@dataclass(frozen=True)
class UserPart:
    """A part of the explaining run's user-mode samples in the measured runs' account: its ns, its
    share of the CPU time and that share's 95% interval."""
    ns: float
    share: float
    interval: tuple[float, float]


def own_user_samples(stacks) -> int:
    """The explaining run's user-mode samples innermost in memsleuth's own preloads (the heap
    accounting's wrappers of malloc and free, the call-site sampler): work the measured runs do not
    have, so no part of their user time (5.2% of a Lua script's samples, 1.7% of a Node program's)."""
    return sum(st.samples for st in stacks.stacks
               if not st.in_kernel and st.functions and st.functions[0].startswith(OWN))


def user_part(sc, stacks, samples: int) -> UserPart:
    """`samples` of the explaining run's user-mode samples (its user call chains, `stacks`: a
    collector, the allocator's code) as a part of the scope's CPU time: their share of the user-mode
    samples (memsleuth's own left out: own_user_samples) times the scope's user time. The kernel's
    parts are shares of its kernel time (`sampled`), so the two never add up past the CPU time,
    whatever share of its own time the explaining run's
    instrumentation kept in the kernel (its syscall tracing: a 4-thread program contending on one
    glibc arena spent 62% of the explaining run in user mode against 44% of the measured run, and,
    as shares of all the samples, its allocator's code and its futex calls read 54% each)."""
    user = (stacks.samples - stacks.kernel - own_user_samples(stacks)) if stacks is not None else 0
    cpu = (sc.user_ns or 0.0) + (sc.sys_ns or 0.0)
    if user <= 0 or cpu <= 0:
        return UserPart(0.0, 0.0, (0.0, 0.0))
    ns = min(1.0, samples / user) * (sc.user_ns or 0.0)
    lo, hi = cpu_profile.wilson(samples, user)
    k = (sc.user_ns or 0.0) / cpu
    return UserPart(ns, ns / cpu, (lo * k, hi * k))


def sampled_headline(ns: float, share: float, interval: tuple[float, float]) -> str:
    """'310 ms = 12% of the CPU time (sampled, 95% CI 10-14%)': a sampled cost as every time finding
    heads it."""
    lo, hi = interval
    return f"{ms(ns)} ms = {pct(share)} of the CPU time (sampled, 95% CI {lo:.0%}-{hi:.0%})"


def pct(share: float) -> str:
    """A share as the findings write it: whole percents, one decimal below 10% (4.6% is not "5%", the
    materiality threshold it did not reach)."""
    if 0 < share < 0.0005:
        return "under 0.1%"
    return f"{share:.1%}" if share < 0.095 else f"{share:.0%}"


def ms(ns: float) -> str:
    """Milliseconds as the findings write them: whole above 10 ms, one decimal below."""
    return f"{ns / 1e6:,.0f}" if ns >= 10e6 else f"{ns / 1e6:.1f}"


# The calls whose cost grows with the pages they touch: where their sizes were not recorded, the
# kernel time no count explains may be theirs (the upper bound).
SIZED_CALLS = ("munmap", "madvise", "brk", "mremap")


def split(sc, units: UnitCosts | None, released_bytes: dict[str, float] | None = None,
          populated_bytes: float = 0.0, sizes_known: bool = True) -> Split:
    """Splits a scope's (findings.view.Scope) kernel time. `released_bytes`: per syscall, the
    bytes it gave back (munmap's length, madvise's purged ranges, the break's moves down), from
    the calls' arguments where they were recorded; `populated_bytes`: memory madvise populated
    (MADV_POPULATE_*, WILLNEED), faulted in by the call itself."""
    u = units or DEFAULT
    est: dict[str, float] = {}
    faults = sc.minflt or 0.0
    if faults:
        est["page-faults"] = faults * u.fault_ns
    for name, n in sc.syscalls.items():
        if n:
            est[name] = n * u.syscall(name)
    for name, b in (released_bytes or {}).items():
        if b and name in est:
            est[name] += b / PAGE_BYTES * u.release_page_ns
    if populated_bytes and "madvise" in est:
        est["madvise"] += populated_bytes / PAGE_BYTES * u.fault_ns
    total = sum(est.values())
    # At most the kernel time plus tick slack, and never more than the CPU time the scope had.
    cap = max(sc.sys_ns, min(sc.sys_ns + TICK_SLACK_NS, sc.user_ns + sc.sys_ns), 0.0)
    scale = min(1.0, cap / total) if total > 0 else 1.0
    parts = {k: v * scale for k, v in est.items()}
    sized = {k: v for k, v in parts.items() if k in SIZED_CALLS}
    rest = sc.sys_ns - sum(parts.values())
    upper = False
    if not sizes_known and sized and rest > 0:
        # Without the calls' sizes, the time no count explains is shared by the sized calls in
        # proportion to their estimates: an upper bound, said so wherever it is quoted.
        base = sum(sized.values())
        for k, v in sized.items():
            parts[k] = v + rest * v / base
        upper = True
    return Split(sc.wall_ns, sc.user_ns + sc.sys_ns, sc.sys_ns, Counts(parts), scale, u, upper)


def sampled(sc, profile: cpu_profile.Profile, explained: Counts, units: UnitCosts | None = None) -> Split:
    """The scope's kernel time split by the explaining run's samples, in two steps.

    What each kind of kernel entry would have taken in the scope: its sampled time (samples x
    period) per event the explaining run counted (`explained`: "page-faults" and each syscall, its
    own counts) times the scope's count of it; other kernel work (interrupts, scheduling) per
    second of wall time (`explained["wall_ns"]`); the rest (exit's teardown, uncounted calls) as
    sampled. Then the scope's own kernel time (rusage) is shared out in those proportions: a fault
    costs the same kind of work in both runs, not the same time (on a VM one run's faults took
    2.4x another's), and the explaining run's instrumentation adds work of its own, which the
    per-event and per-second steps leave out; its syscall tracepoints' own work at a call's entry
    (cpu_profile.TRACING, the call not yet dispatched) is left out whole, as are its sampler's own
    perf_event_open calls (cpu_profile.SAMPLER_OWN). Parts: "page-faults" (faults outside a system call)
    and each memory system call (events.SYSCALLS); the rest of the kernel time is `other_ns`."""
    cpu = (sc.user_ns or 0.0) + (sc.sys_ns or 0.0)
    period = float(profile.period_ns)
    measured = {"page-faults": float(sc.minflt or 0.0), **{k: float(v) for k, v in sc.syscalls.items()}}
    wall_ratio = sc.wall_ns / explained["wall_ns"] if explained["wall_ns"] else 1.0
    parts, behind, rest, by_class = {}, {}, 0.0, {}
    for cls, k in profile.counts.items():
        if cls in (cpu_profile.USER, cpu_profile.TRACING, cpu_profile.SAMPLER_OWN):   # the explaining run's own
            continue
        name = "page-faults" if cls == cpu_profile.FAULT else cls
        if explained[name] and name in measured:
            t = k * period / explained[name] * measured[name]
        elif cls == cpu_profile.OTHER:
            t = k * period * wall_ratio
        else:
            t = k * period
        by_class[cls] = t
        if name == "page-faults" or name in SYSCALLS:
            parts[name], behind[name] = t, k
        else:
            rest += t
    estimated = sum(parts.values()) + rest
    kernel = min(sc.sys_ns or 0.0, cpu) if sc.sys_ns else min(estimated, cpu)
    f = kernel / estimated if estimated > 0 else 1.0
    return Split(sc.wall_ns, cpu, kernel, Counts({k: v * f for k, v in parts.items()}), 1.0, units or DEFAULT, False,
                 profile, behind, Counts({k: v * f for k, v in by_class.items()}))


def confidence_from_share(share: float, confirmed: bool = True) -> str:
    """A time finding's confidence from its cost's share of the CPU time (HIGH_SHARE, MEDIUM_SHARE),
    one step lower when its words rest on counts alone (`confirmed` False)."""
    level = 2 if share >= HIGH_SHARE else 1 if share >= MEDIUM_SHARE else 0
    if not confirmed:
        level -= 1
    return ("low", "medium", "high")[max(level, 0)]
