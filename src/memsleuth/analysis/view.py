"""The evidence of one cell, as the rules read it: medians over the cell's successful runs."""
from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass, field, fields
from statistics import median

from typing import Callable

from memsleuth.records import cpu_profile
from memsleuth.records.cpu_stacks import CpuStacks
from memsleuth.records.evidence import CounterReadings, Region, Sample, median_by_wall
from memsleuth.records.model import Counts, Readings
from memsleuth.records.syscall_args import RELEASES, FaultSamples
from memsleuth.analysis import cost as cost_mod, phase as phase_mod
from memsleuth.units import PAGE_BYTES


# The process's recorded syscall arguments describe a region's calls when the region made at
# least this share of them (compare's region main makes nearly all of an allocator's calls).
ARGS_COVER = 0.5
# The explaining run's samples cover the whole process; a region holding at least this share of
# the process's CPU time (a program that is all one region) is costed by them too.
SAMPLED_REGION = 0.95


@dataclass
class Scope(CounterReadings):
    """Medians of one region (or of the whole process) over the runs."""
    name: str                    # region name, or "process"
    ops: float | None
    wall_ns: float
    user_ns: float
    sys_ns: float
    counters: Readings           # medians of every perf counter measured in all the runs
    syscalls: Counts
    rss_growth_kb: float | None = None
    brk_delta_bytes: float | None = None

    @property
    def sys_share(self) -> float | None:
        total = self.user_ns + self.sys_ns
        return self.sys_ns / total if total > 0 else None

    def per_kop(self, value: float | None) -> float | None:
        """Events per 1000 operations."""
        return 1000 * value / self.ops if value is not None and self.ops else None


def steps_of(sample: Sample, name: str) -> list[Region]:
    """The occurrences of a top-level region in one run, the first left out when there are more.

    The one definition of a step: the first occurrence is where the heap first grows and every
    allocator faults its memory once; the question is what each following step pays.
    """
    regs = [r for r in sample.regions if r.name == name and r.depth == 0]
    return regs[1:] if len(regs) > 1 else regs


def typical_step(samples: list[Sample], name: str, get: Callable[[Region], float | None]) -> float | None:
    """The typical step of a repeated region: the median over the steps of each run, then over the runs."""
    return _med_opt(_med_opt(get(r) for r in steps_of(s, name)) for s in samples)


@dataclass
class StepRegion:
    """A region that repeats in every run (a step loop): its per-step medians (see steps_of)."""
    name: str
    steps: int
    minflt_per_step: float       # medians over the steps (the typical step), then over the runs
    brk_shrink_per_step: float   # bytes the break moved down per step (0 if it never shrank)
    shrinking_steps: int         # steps in which the break moved down
    wall_ns_per_step: float
    syscalls_per_step: dict[str, float]


@dataclass(frozen=True)
class FaultTrace:
    """The explaining run's sampled page faults (ms-run's syscall_args "faults"), each looked up in
    the ranges its process gave back before it: by what gave it back ("none": a first touch,
    "munmap", "madvise", "brk"), each (faults, on a present page, writes of a missing page); the
    rest read a missing page. Counts stand for `every` faults each."""
    every: int
    by_release: dict[str, tuple[float, float, float]]
    mapped_churned: float = 0.0     # of the faults in mappings made during the run, those munmap gave back later
    mapped_samples: float = 0.0     # the CPU samples taken in faults of those mappings
    mapped_churned_samples: float = 0.0   # of them, those in mappings that churned
    traced_share: float = 1.0       # the share of the run's faults traced (in random ticks), the counts scaled

    @classmethod
    def of(cls, f: FaultSamples | None) -> "FaultTrace | None":
        return cls(**{k.name: getattr(f, k.name) for k in fields(f)}) if f is not None else None

    def churned(self, by_time: bool = False) -> float:
        """Of the faults in mappings made during the run, the share in mappings munmap gave back
        later (mmap churn: a fresh mapping per use); `by_time`: of the CPU samples taken in those
        faults, where the run counted them (a library's thousands of small first touches then weigh
        what they cost against a few huge pages zeroed per churned mapping, not their number)."""
        if by_time and self.mapped_samples >= MIN_JOINED:
            return min(1.0, self.mapped_churned_samples / self.mapped_samples)
        mapped = self.by_release["mapped"][0]
        return min(1.0, self.mapped_churned / mapped) if mapped else 0.0

    def causes(self, time_samples: dict[str, int] | None = None) -> tuple[dict[str, float], str]:
        """The faults' shares by cause: "munmap" (memory munmap gave back, or a fresh mapping it gave
        back later), "madvise", "brk", "none" (first touches, a kept fresh mapping's too); weighted
        by time where the CPU samples taken in fault handlers were joined to them (at least
        MIN_JOINED), else by count. And how: "time" or "count"."""
        known = {k: float(v) for k, v in (time_samples or {}).items() if k != "unknown"}
        if sum(known.values()) >= MIN_JOINED:
            total, how = sum(known.values()), "time"
            raw = {k: v / total for k, v in known.items()}
        else:
            total, how = self.total, "count"
            raw = {k: v[0] / total for k, v in self.by_release.items()}
        raw = {**dict.fromkeys(RELEASES, 0.0), **raw}
        mapped, churn = raw["mapped"], self.churned(by_time=how == "time")
        return {"munmap": raw["munmap"] + mapped * churn, "madvise": raw["madvise"],
                "brk": raw["brk"], "none": raw["none"] + mapped * (1 - churn)}, how

    @property
    def total(self) -> float:
        return sum(v[0] for v in self.by_release.values())

    def write_share(self, released_by: str) -> float:
        """Of those faults, the share that wrote a missing page (for "none": first touches, of memory
        never given back and of fresh mappings alike); the rest read one or hit a present page."""
        kinds = ("none", "mapped") if released_by == "none" else (released_by,)
        n, writes = (sum(self.by_release[k][i] for k in kinds) for i in (0, 2))
        return writes / n if n else 0.0

    def read_share(self, released_by: str) -> float:
        """Of those faults, the share that read a missing page (not present, not a write); for
        "none", first touches: those of memory never given back and of fresh mappings alike."""
        kinds = ("none", "mapped") if released_by == "none" else (released_by,)
        n, present, writes = (sum(self.by_release[k][i] for k in kinds) for i in range(3))
        return max(0.0, n - present - writes) / n if n else 0.0

    def records(self) -> float:
        return self.total / max(self.every, 1)


# Of the sampled faults whose kernel chain shows what they did, at least this many before their kinds
# decide what the faults were (a share of a few samples says nothing).
MIN_KIND_SAMPLES = 50
# The fault kinds of fresh anonymous memory, small pages and huge (records/cpu_profile.FAULT_KINDS).
HUGE_FILL = "huge-page zero-fill"
ZERO_FILL = ("small-page zero-fill", HUGE_FILL)
# Of the zero-fill faults, from this share on huge pages are what the words name.
HUGE_WORDS_SHARE = 0.5

# The words for what gave the memory back, as the evidence says it.
# munmap: a fresh mapping's faults count only as far as the process then mapped again, no larger than what
# it gave back (ms-run's maps_again): a table grown by doubling, each old copy freed, has none.
RELEASED_BY = {"munmap": "munmap (or in fresh mappings munmap gave back later, as far as the process then mapped "
                         "no larger ones again)",
               "madvise": "a purging madvise", "brk": "the program break moving down"}
# At least this many CPU samples in fault handlers joined to a traced fault weigh the causes by time.
MIN_JOINED = 30
# The explaining run's count of a call this many times the measured runs' (or a fraction as small)
# is said beside the arguments it gave (CellView.args_source).
ARGS_RUNS_APART = 2.0


@dataclass
class CellView:
    label: str
    allocator: str
    samples: list[Sample]                    # successful measured runs
    failures: list[Sample] = field(default_factory=list)
    ci_half_width: float | None = None
    warnings: list = field(default_factory=list)   # memsleuth.quality.QualityWarning
    # The regions whose timing is the result (compare: "main"); None: every region may be timed
    # (check on someone's program, where only its author knows).
    timed: tuple[str, ...] | None = None
    # The explaining run(s) of the cell (records.EXPLAIN_ROUND): not measured, they carry the
    # syscalls' arguments that `args` reads.
    explain: list[Sample] = field(default_factory=list)
    # What each kind of kernel entry costs on the run's machine (ms-calibrate); None: the defaults.
    units: cost_mod.UnitCosts | None = None
    # check --pid: the runs are one window on a process that ran before it and goes on after it
    window: bool = False

    def args_cover(self, sc: Scope, syscall: str) -> float | None:
        """How much of the process's recorded calls of a syscall (their arguments are the whole
        process's) the scope made: 1 for the process; None where nothing was recorded."""
        calls = self.args(syscall, "calls")
        if calls is None:
            return None
        if sc.name == "process":
            return 1.0
        return min(1.0, sc.syscalls[syscall] / calls) if calls else 0.0

    def args_source(self, syscall: str) -> str:
        """How the calls' arguments were read, for the evidence's wording: 'the calls' arguments,
        from the kernel', with 'estimated from one call in P' when the explaining run sampled them."""
        every = max((a.every for s in self.explain + self.samples if (a := s.syscall_args.of(syscall)) is not None),
                    default=1)
        text = "the calls' arguments, from the kernel" + (f"; estimated from one call in {every:,}" if every > 1 else "")
        # The arguments are the explaining run's: where its count of the call is far from the measured
        # runs' (a runtime's background work paced by time, a program whose calls follow its timing), the
        # words' numbers and the cost's are of different runs, and the evidence says so.
        sc = self.process
        recorded, measured = self.args(syscall, "calls"), sc.syscalls[syscall] if sc else None
        if recorded and measured and not 1 / ARGS_RUNS_APART <= recorded / measured <= ARGS_RUNS_APART:
            runs = "the measured run" if len(self.samples) == 1 else "the measured runs (median)"
            text += f"; the explaining run made {recorded:,.0f} of these calls, {runs} {measured:,.0f}"
        return text

    def describes(self, sc: Scope, syscall: str) -> bool:
        """Whether the recorded arguments describe the scope's calls: the scope made at least
        ARGS_COVER of them (a region that makes most of the process's madvise calls)."""
        cover = self.args_cover(sc, syscall)
        return cover is not None and cover >= ARGS_COVER

    def releases_recorded(self) -> bool:
        """Whether the arguments of every call that gives memory back (munmap, madvise, brk) were
        recorded in the runs that carry arguments: a call whose tracepoint did not open (no root, no
        tracefs) gave back an unknown amount, never nothing."""
        runs = [s.syscall_args for s in self.explain + self.samples if s.syscall_args]
        return bool(runs) and all(a.of(k) is not None for a in runs for k in ("munmap", "madvise", "brk"))

    def released_bytes(self, sc: Scope) -> dict[str, float]:
        """Per syscall, the bytes it gave back to the kernel in the scope (the calls' arguments:
        munmap's lengths, madvise's purging advice, the break's moves down), in proportion to the
        scope's share of the recorded calls; empty where they do not describe the scope."""
        out = {"munmap": self.args("munmap", "bytes"), "brk": self.args("brk", "down_bytes"),
               "madvise": sum(b for fam, (_, b) in self.advice_families().items() if fam in cost_mod.RELEASING)}
        return {k: v * self.args_cover(sc, k) for k, v in out.items() if v and self.describes(sc, k)}

    @property
    def _profiled_run(self) -> Sample | None:
        """The explaining run that sampled the CPU time."""
        return next((s for s in self.explain if s.cpu_profile), None)

    @functools.cached_property
    def profile(self) -> cpu_profile.Profile | None:
        """The explaining run's sampled CPU time by kernel path (cpu_profile.py), when it has one."""
        s = self._profiled_run
        return cpu_profile.read(s.cpu_profile) if s is not None else None

    @functools.cached_property
    def cpu_stacks(self) -> CpuStacks | None:
        """The explaining run's CPU samples with their user chains (records/cpu_stacks.py), when it
        took them."""
        return next((s.cpu_stacks for s in self.explain if s.cpu_stacks is not None and s.cpu_stacks.samples), None)

    def user_phase(self, when, memory: bool = True) -> phase_mod.Phase | None:
        """When in the run a part of the user-mode samples arises, from its counts per time bucket of
        the user-chain sampler (`when`); `memory`: a teardown may be told from resident memory."""
        s = self.cpu_stacks
        if s is None:
            return None
        found = phase_mod.of_buckets(list(when), s.when_bucket_ns, s.when_span_ns, self.median_sample if memory else None)
        return phase_mod.in_window(found) if self.window else found

    @property
    def explained_counts(self) -> Counts:
        """The explaining run's own counts of what its samples are classified by: its page faults
        (minor) and each syscall, so that sampled time per event can be read."""
        s = self._profiled_run
        if s is None:
            return Counts()
        return Counts({"page-faults": float(s.counters["page-faults-minor"] or s.minflt or 0),
                       **{k: float(v) for k, v in s.syscalls.items()}, "wall_ns": float(s.wall_ns)})

    def sampled_for(self, sc: Scope) -> cpu_profile.Profile | None:
        """The profile when it can cost this scope: usable, and the scope is the whole process (the
        samples cover the whole run) or a region holding at least SAMPLED_REGION of its CPU time."""
        p = self.profile
        if p is None or not p.usable:
            return None
        if sc.name == "process":
            return p
        whole = self.process
        cpu, all_cpu = sc.user_ns + sc.sys_ns, (whole.user_ns + whole.sys_ns) if whole else 0.0
        return p if all_cpu and cpu >= SAMPLED_REGION * all_cpu else None

    def calling(self, syscall: str, floor: float) -> tuple[Scope, float, cost_mod.Split] | None:
        """(the scope, its calls of `syscall`, its kernel split) where the scope made at least
        `floor` of them; None otherwise (a rule about the call has nothing to say)."""
        sc = self.scope
        if sc is None or sc.syscalls[syscall] < floor:
            return None
        return sc, sc.syscalls[syscall], self.kernel_split(sc)

    def kernel_split(self, sc: Scope, upper_bound: bool = True) -> cost_mod.Split:
        """The scope's kernel time split across its faults and system calls (analysis/cost.py):
        measured from the explaining run's samples where they cost the scope (`sampled_for`),
        else estimated from the counts. Without the calls' sizes, `upper_bound` gives the sized
        calls the time no count explains (what a rule may blame at most); False keeps to the
        counts' own estimates."""
        if (p := self.sampled_for(sc)) is not None:
            return cost_mod.sampled(sc, p, self.explained_counts, self.units)
        populated = sum(b for fam, (_, b) in self.advice_families().items() if fam == "prefault") \
            * self.args_cover(sc, "madvise") if self.describes(sc, "madvise") else 0.0
        sized = [k for k in cost_mod.SIZED_CALLS if sc.syscalls[k]]
        known = not upper_bound or (bool(sized) and all(self.describes(sc, k) for k in sized)) or \
            (sc.name == "process" and any(s.syscall_args for s in self.explain + self.samples))
        return cost_mod.split(sc, self.units, self.released_bytes(sc), populated, sizes_known=known)

    def advice_families(self) -> dict[str, tuple[float, float]]:
        """madvise's calls and bytes by family of advice (cost_mod.ADVICE_FAMILY), from the calls'
        arguments of the explaining run (empty where they were not recorded)."""
        s = self.explain_sample
        madvise = s.syscall_args.of("madvise") if s else None
        out: dict[str, tuple[float, float]] = defaultdict(lambda: (0.0, 0.0))
        for k, (calls, nbytes) in madvise.by_advice.items() if madvise else ():
            fam = cost_mod.advice_family(k)
            out[fam] = (out[fam][0] + calls, out[fam][1] + nbytes)
        return dict(out)

    @functools.cached_property
    def fault_trace(self) -> FaultTrace | None:
        """The explaining run's page faults traced by address (FaultTrace), when it has them."""
        s = next((s for s in self.explain if s.syscall_args.faults is not None), None)
        return FaultTrace.of(s.syscall_args.faults) if s is not None else None

    def traced_for(self, sc: Scope) -> FaultTrace | None:
        """The fault trace when it describes the scope: the whole process, or a region holding
        SAMPLED_REGION of its CPU time (the trace covers the whole run)."""
        t = self.fault_trace
        if t is None or sc.name == "process":
            return t
        whole = self.process
        return t if whole and sc.minflt and whole.minflt and sc.minflt >= SAMPLED_REGION * whole.minflt else None

    def fault_causes(self, sc: Scope) -> tuple[dict[str, float], str] | None:
        """The scope's faults by cause (FaultTrace.causes), weighted by time where the explaining
        run's fault samples were joined to the traced faults."""
        t = self.traced_for(sc)
        if t is None:
            return None
        p = self.sampled_for(sc)
        return t.causes(p.fault_release if p is not None else None)

    def fault_kind_shares(self) -> Counts | None:
        """The explaining run's sampled page faults by what the kernel chain shows they did
        (records/cpu_profile.FAULT_KINDS), as shares of those whose chain shows it; None where fewer
        than MIN_KIND_SAMPLES show it (or nothing was sampled)."""
        p = self.profile
        if p is None:
            return None
        seen = {k: v for k, v in p.fault_kinds.items() if k != cpu_profile.UNRESOLVED_FAULT}
        total = sum(seen.values())
        return Counts({k: v / total for k, v in seen.items()}) if total >= MIN_KIND_SAMPLES else None

    def zero_fill_share(self) -> float:
        """The share of the page faults that zero-filled fresh anonymous memory, small pages or huge
        (first touches, re-faults of memory given back, the zero page): the only faults the
        first-touch and churn rules may claim. 1 where the samples do not say."""
        kinds = self.fault_kind_shares()
        return 1.0 if kinds is None else sum(kinds[k] for k in ZERO_FILL)

    def huge_fill_share(self) -> float:
        """Of the zero-fill faults, the share that zeroed a whole huge page (transparent huge pages);
        0 where the samples do not say."""
        kinds = self.fault_kind_shares() or Counts()
        fill = sum(kinds[k] for k in ZERO_FILL)
        return kinds[HUGE_FILL] / fill if fill else 0.0

    def refault_cost(self, sc: Scope, split: cost_mod.Split, released_by: str,
                     bound_pages: float) -> tuple[float, str | None]:
        """The time of the scope's page faults that touch again memory `released_by` ("munmap",
        "madvise", "brk") gave back before them, and the evidence that says how it is known: from the
        fault trace where there is one (its share of the sampled faults times the faults' time: a
        fact), else at most `bound_pages` faults at the split's unit cost (an upper bound, None)."""
        t = self.traced_for(sc)
        if t is not None:
            causes, how = self.fault_causes(sc)
            share = causes[released_by]
            every = f", one fault in {t.every:,}" if t.every > 1 else ""
            if t.traced_share < 1:
                every += f", traced in random slices of the run that held {t.traced_share:.0%} of its faults"
            what = ("of the page faults' sampled time" if how == "time" else f"of {t.records():,.0f} sampled page faults")
            return split.cost("page-faults") * min(share, self.zero_fill_share()), (
                f"{share:.0%} {what} is in memory given back before by {RELEASED_BY.get(released_by, released_by)} "
                f"(each fault's address looked up in the ranges released and mapped earlier{every})")
        return min(bound_pages * split.units.fault_ns * split.scale,
                   split.cost("page-faults") * self.zero_fill_share()), None

    def growth_fault_share(self, sc: Scope, split: cost_mod.Split) -> float:
        """The share of the scope's page-fault time that is the first writes of pages mremap added to
        growing mappings (realloc growth): at most the pages grown (the calls' arguments; without
        them one page per call), and within the first touches (a grown page was never given back:
        the fault trace's "none"), so mremap-churn and first-touch never claim the same faults
        (first-touch claims the rest). 0 below mremap-churn's floor."""
        from memsleuth.events import MECHANISM_FLOORS
        calls = sc.syscalls["mremap"]
        faults_ns = split.cost("page-faults")
        if calls < MECHANISM_FLOORS["mremap"] or not faults_ns or not sc.minflt:
            return 0.0
        grown = self.args("mremap", "grow_bytes") if sc.name == "process" else None
        pages = min(sc.minflt, grown / PAGE_BYTES if grown else calls)
        share = pages * split.units.fault_ns * split.scale / faults_ns
        t = self.traced_for(sc)
        ceiling = self.fault_causes(sc)[0]["none"] if t is not None else 1.0
        return min(share, ceiling) * self.zero_fill_share()

    def refault_bound(self, sc: Scope) -> float:
        """At most how many of the process's page faults can be re-faults: every page resident at
        the peak was faulted in at least once, so the faults beyond the peak's pages. (A region:
        all its faults; its resident memory is read only at its borders.)"""
        faults = sc.minflt or 0.0
        if sc.name != "process" or self.maxrss_kb is None:
            return faults
        return max(0.0, faults - self.maxrss_kb * 1024 / PAGE_BYTES)

    def phase(self, *keys: str) -> phase_mod.Phase | None:
        """When in the run a cost arises (analysis/phase.py): from the explaining run's samples under
        these keys (cpu_profile.when_key: "munmap", "page-faults:copy-on-write", "page-faults@none"),
        else from the median run's timeline counts of the same calls or faults."""
        found = phase_mod.of_samples(self.profile, keys, self.median_sample)
        if found is None and not (self.profile is not None and self.profile.when_bucket_ns):
            columns = tuple(dict.fromkeys("page-faults-minor" if k.startswith(cpu_profile.FAULT) else k for k in keys))
            found = phase_mod.of_events(self.median_sample, columns)
        return phase_mod.in_window(found) if self.window else found

    @property
    def main(self) -> Scope | None:
        return self.region_scope("main")

    @property
    def process(self) -> Scope | None:
        if not self.samples:
            return None
        # Without perf counters, rusage still counts the process's faults.
        counters = [{"page-faults-minor": s.minflt, "page-faults-major": s.majflt, **_counted(s.counters)}
                    for s in self.samples]
        return Scope("process", None, _med(s.wall_ns for s in self.samples), _med(s.user_ns for s in self.samples),
                     _med(s.sys_ns for s in self.samples), _med_dict(counters, Readings),
                     _med_dict([s.syscalls for s in self.samples]))

    @property
    def tasks_created_bound(self) -> float | None:
        """The median over the measured runs of the processes and threads the machine created while
        each ran: an upper bound of what the program's tree created (other users' count too); None
        where a run did not read it."""
        made = [s.machine_tasks_created for s in self.samples]
        return _med(made) if made and None not in made else None

    @property
    def scope(self) -> Scope | None:
        """Region main when every run has one (the region of interest), else the whole process."""
        return self.main or self.process

    def region_scope(self, name: str) -> Scope | None:
        regions = [s.region(name) for s in self.samples]
        if not regions or any(r is None for r in regions):
            return None
        return _scope(name, regions)

    def occurrences(self, name: str) -> tuple[Scope, int]:
        """Medians over every occurrence of a region in every run, and its occurrences per run."""
        per_run = [[r for r in s.regions if r.name == name] for s in self.samples]
        return _scope(name, [r for rs in per_run for r in rs]), max(len(rs) for rs in per_run)

    def top_regions(self) -> list[Scope]:
        """Each timed top-level region name that appears exactly once per run, in order."""
        if not self.samples:
            return []
        first = self.samples[0]
        names = [r.name for r in first.regions if r.depth == 0]
        once = [n for n in dict.fromkeys(names) if names.count(n) == 1 and (self.timed is None or n in self.timed)]
        return [sc for n in once if (sc := self.region_scope(n)) is not None]

    def step_regions(self, min_steps: int = 3) -> list[StepRegion]:
        """Top-level regions that repeat at least min_steps times (after the first) in every run."""
        if not self.samples:
            return []
        names = [r.name for r in self.samples[0].regions if r.depth == 0]
        out = []
        for name in dict.fromkeys(names):
            per_run = [steps_of(s, name) for s in self.samples]
            steps = min(len(rs) for rs in per_run)
            if steps < min_steps:
                continue
            # Medians, not means: one odd step (a late arena, a huge page) must not pass for all.
            out.append(StepRegion(
                name=name, steps=steps,
                minflt_per_step=self.step(name, lambda r: r.minflt or 0) or 0.0,
                brk_shrink_per_step=self.step(name, lambda r: max(0, -(r.brk_delta_bytes or 0))) or 0.0,
                shrinking_steps=self.step_count(name, lambda r: (r.brk_delta_bytes or 0) < 0) or 0,
                wall_ns_per_step=self.step(name, lambda r: r.wall_ns) or 0.0,
                syscalls_per_step=_med_dict([{k: _med(r.syscalls[k] for r in rs) for k in rs[0].syscalls}
                                             for rs in per_run]),
            ))
        return out

    def step(self, name: str, get: Callable[[Region], float | None]) -> float | None:
        """The typical step of a repeated region (typical_step)."""
        return typical_step(self.samples, name, get)

    def step_count(self, name: str, test: Callable[[Region], bool]) -> int | None:
        """In how many steps a repeated region met a test: the median over runs."""
        counts = [sum(1 for r in steps_of(s, name) if test(r)) for s in self.samples]
        return int(median(counts)) if counts else None

    def region_value(self, name: str, get: Callable[[Region], float | None]) -> float | None:
        """Median over runs of a value of a region that occurs once per run."""
        return _med_opt(get(r) for s in self.samples if (r := s.region(name)) is not None)

    def args(self, syscall: str, key: str) -> float | None:
        """Median over runs of one total of ms-run's syscall arguments (`syscall_args`), or None
        when they were not recorded."""
        source = [s for s in self.explain + self.samples if s.syscall_args]
        return _med_opt(a.total(key) for s in source if (a := s.syscall_args.of(syscall)) is not None)

    def heaviest_size(self, syscall: str) -> float | None:
        """The size class (log2 bucket's low end, bytes) that carries most of a call's bytes in the
        explaining run's size histogram (ms-run's "sizes"): what the costly calls release, where an
        average would mix a runtime's many small mappings with its few large ones."""
        s = self.explain_sample
        args = s.syscall_args.of(syscall) if s else None
        # by their recorded bytes, else each call at the middle of its class
        best = max(((args.size_bytes.get(lo, lo * 1.5 * n), lo) for lo, n in args.sizes), default=None) \
            if args else None
        return best[1] if best else None

    def size_class_mean(self, syscall: str, size_class: float) -> float | None:
        """The mean size of a call's calls in one size class (the bytes ms-run recorded for it over
        their count); None where the run recorded no bytes per class."""
        s = self.explain_sample
        args = s.syscall_args.of(syscall) if s else None
        n = dict(args.sizes).get(size_class) if args else None
        b = args.size_bytes.get(size_class) if args else None
        return b / n if n and b else None

    @property
    def median_sample(self) -> Sample | None:
        """The run with the median wall time: the one a timeline is read from."""
        i = median_by_wall(self.samples)
        return None if i is None else self.samples[i]

    @property
    def explain_sample(self) -> Sample | None:
        """The run that carries the syscalls' arguments: the explaining run, else the median run."""
        with_args = [s for s in self.explain + self.samples if s.syscall_args]
        if not with_args:
            return self.median_sample
        ordered = sorted(with_args, key=lambda s: s.wall_ns)
        return ordered[(len(ordered) - 1) // 2]

    @property
    def unsupported(self) -> dict[str, str]:
        for s in self.samples + self.failures:
            if s.unsupported:
                return s.unsupported
        return {}

    @property
    def peak_live_bytes(self) -> float | None:
        vals = [s.result.get("peak_live_bytes") for s in self.samples if s.result]
        return _med_opt(vals)

    @property
    def maxrss_kb(self) -> float | None:
        return _med_opt(s.maxrss_kb for s in self.samples)

    @property
    def processes(self) -> int:
        """How many processes the command ran, as far as the evidence shows: the most alive at one
        tick of the timeline, or the processes the explaining run's samples saw (every process that
        ran on a CPU while it was sampled). A tree's summed faults are never held against the peak
        of one of its processes."""
        live = max((max(t.column("procs") or [1]) for s in self.samples if (t := s.timeline) is not None),
                   default=1)
        seen = sum(e[2] for e in self.profile.executables) if self.profile is not None else 0
        return max(int(live), int(seen), 1)

    @property
    def preload_reaches_program(self) -> bool | None:
        """Whether LD_PRELOAD reaches the program that had most of the CPU time: the explaining
        run's processes of it mapped the libraries it preloaded (False: a static executable, or one
        started with a cleared environment; None: not known)."""
        p = self.profile
        if p is None or not p.preloads or not p.executables:
            return None
        top = max(p.executables, key=lambda e: e[1])[0]
        seen = [(execd, mapped) for entries in p.preloads.values() for exe, _, execd, mapped in entries if exe == top]
        return None if not seen else all(mapped > 0 for _, mapped in seen)

    @property
    def programs_started(self) -> int:
        """The programs the tree exec'd beside the command's own start, as the explaining run's
        samples saw them (each process that ran on a CPU while sampled, named by what it ran last)."""
        p = self.profile
        return max(sum(e[2] for e in p.executables) - 1, 0) if p is not None else 0

    def fault_executables(self) -> list[tuple[str, int, float]]:
        """(executable, processes, share of the sampled fault time) for the executables that took
        page faults in the explaining run, the most first (cpu_profile.by_executable)."""
        p = self.profile
        if p is None:
            return []
        faults = {name: by[cpu_profile.FAULT] for name, by in p.by_executable.items()}
        total = sum(faults.values())
        procs = defaultdict(lambda: 1, {e[0]: e[2] for e in p.executables})
        return sorted(((name, procs[name], n / total) for name, n in faults.items() if n),
                      key=lambda t: -t[2]) if total else []

    @property
    def heap(self) -> dict | None:
        """The heap accounting of the explaining run (heap.py), when it was made."""
        return next((s.heap for s in self.explain + self.samples if s.heap), None)


def _scope(name: str, regions: list[Region]) -> Scope:
    ops = [r.ops for r in regions]
    return Scope(name, _med(ops) if any(ops) else None, _med(r.wall_ns for r in regions),
                 _med(r.user_ns for r in regions), _med(r.sys_ns for r in regions),
                 _med_dict([_counted(r.counters) for r in regions], Readings),
                 _med_dict([r.syscalls for r in regions]),
                 rss_growth_kb=_med_opt(r.rss_growth_kb for r in regions),
                 brk_delta_bytes=_med_opt(r.brk_delta_bytes for r in regions))


def _med(values) -> float:
    v = list(values)
    return float(median(v)) if v else 0.0


def _med_opt(values) -> float | None:
    v = [x for x in values if x is not None]
    return float(median(v)) if v else None


def _counted(counters: dict) -> dict[str, float]:
    """The counters that have a value (an event that was never scheduled reads None)."""
    return {k: v for k, v in counters.items() if v is not None}


def _med_dict(dicts: list[dict], kind: type[Counts] | type[Readings] = Counts) -> Counts | Readings:
    """The median of each name that every dict has (a counter that did not open in one run is no
    median of the others)."""
    keys = {k for d in dicts for k in d}
    return kind({k: _med(d[k] for d in dicts) for k in keys if all(k in d for d in dicts)})
