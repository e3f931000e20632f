"""Runs a plan: a preload check and a warm-up per cell, then rounds that run every cell of a
group once, interleaved.

Interleaving (A B C D A B C D ...) spreads slow drifts of the machine over all alternatives
alike, and lets the analysis pair samples by round. The order inside a round rotates, so that
no allocator always runs right after the same neighbour. Rounds go on until every cell of the
group has a CI half-width at or below the target (all cells of a group keep running until the
last one gets there, so that every round stays a complete pair), or until the maximum.

Every sample is stored the moment it exists; Ctrl-C keeps what finished. A cell whose preload
check or warm-up fails (a crash, OOM, timeout, failed preload) is not repeated: the failure is
its result, and a timeout would only cost its limit again.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from memsleuth.events import FAULT_FLOOR, FUTEX_FLOOR, MECHANISM_FLOORS, MEMORY_FLOOR_BYTES
from memsleuth.textsafe import visible
from memsleuth.errors import stop_signal
from memsleuth.measure import launcher, native, where
from memsleuth import stats
from memsleuth.records.evidence import metric_kind, with_counts
from memsleuth.records.model import Counts
from memsleuth.measure.plan import REFERENCE_LABEL, Plan
from memsleuth.records.stored import EXPLAIN_ROUND
from memsleuth.records.store import Store

# Without a terminal, a progress line every this many seconds (CI logs stay short).
PLAIN_PROGRESS_EVERY_S = 10.0
# The explaining run's CPU samples aimed for: a share's 95% interval is then within about +-2.2
# points (cpu_profile.wilson at 50%), and the sampling costs the same whatever the run's length.
# Each sample costs ~50 us of the run in this VM (a guest timer's interrupt and a kernel chain): at
# 4,000 and 2 kHz the sampling made a 1 s Node.js program 12% and a 2.2 s C one 10% slower, 6% at 1 kHz.
# Still 2 kHz below ~1 s of CPU time: at 1 kHz a short Python fork pool's user chains once failed to
# name CPython as what writes the shared pages (tests/e2e, runtime_running's share).
CPU_SAMPLES = 2000
# The longest period: 10 ms, so the count holds up to 20 s of CPU time (4 ms before 2026-11-28: a
# 10 s program took 2,500 samples, 25% more than aimed for). Not longer: where the tree's events are
# inherited (no cgroup of its own), each thread counts its own period, and a thread that runs less
# CPU time than one period is never sampled.
CPU_PERIOD_MAX_US = 10_000


@dataclass
class Outcome:
    run_id: int
    interrupted: bool
    samples: int
    signum: int = 2           # interrupted: the signal that ended it (Ctrl-C, SIGTERM, SIGHUP)


class Clock:
    """Where a run's time went, by phase: seconds of wall time per phase, in the order first met."""

    def __init__(self):
        self.phases: dict[str, float] = {}
        self._phase: str | None = None
        self._t = time.monotonic()

    def start(self, phase: str) -> None:
        now = time.monotonic()
        if self._phase is not None:
            self.phases[self._phase] = self.phases.get(self._phase, 0.0) + now - self._t
        if phase:
            self.phases.setdefault(phase, 0.0)
        self._phase, self._t = phase, now

    def move(self, source: str, phase: str, seconds: float) -> None:
        """Seconds already counted under `source` that were `phase`'s (measured inside it)."""
        if seconds > 0:
            self.phases[phase] = self.phases.get(phase, 0.0) + seconds
            self.phases[source] = self.phases.get(source, 0.0) - seconds

    def done(self) -> dict[str, float]:
        self.start("")
        return {k: round(v, 3) for k, v in self.phases.items() if k}


# The longest a holder's exit is waited for (its closes: one RCU grace period per tracepoint).
HOLDER_EXIT_S = 10.0


class TracepointHolder:
    """Keeps the syscall tracepoints registered while a comparison runs (`ms-run --hold-events`).

    Without it every measured process pays ~40 ms per tracepoint at exit, when its last perf
    event on that tracepoint closes and the kernel waits for an RCU grace period (measured in
    bench/overhead.py). With a holder alive, those closes are cheap.
    """

    def __init__(self, args: bool = False) -> None:
        """args: the tracepoints an explaining run reads too (page faults, vm_unmapped_area, brk's
        exit): held only around the explaining runs, since a registered page-fault tracepoint adds
        work to every fault of the measured ones."""
        self.proc: subprocess.Popen | None = None
        self.released: subprocess.Popen | None = None     # the holder release() let go, gone
        self.args = args

    def __enter__(self) -> "TracepointHolder":
        try:
            argv = [str(native.ms_run()), "--hold-events", *(["--syscall-args"] if self.args else [])]
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                         start_new_session=True)
            self.proc.stdout.readline()  # "ready": the events are open
        except OSError:
            self.proc = None
        return self

    def __exit__(self, *exc) -> None:
        """Lets the holder go without waiting for it: its closes wait out one RCU grace period per
        tracepoint (~0.25 s here), which nothing after the runs needs (the analysis and the report
        run meanwhile). A thread reaps it; a daemon thread, so memsleuth's own exit never waits."""
        if self.proc is not None:
            self.proc.stdin.close()
            threading.Thread(target=self.proc.wait, name="tracepoint-holder", daemon=True).start()

    def release(self) -> None:
        """Lets the holder go and waits until it is gone: while a syscall tracepoint is registered,
        every system call of every task takes the kernel's slow path (+80 ns each here), which a
        timed run that counts none must not pay."""
        if self.proc is not None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=HOLDER_EXIT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.released, self.proc = self.proc, None


def cell_settled(values: list[float], target: float | None, min_reps: int) -> bool:
    if target is None or len(values) < max(min_reps, stats.MIN_SAMPLES_FOR_CI):
        return False
    hw = stats.median_ci(values).half_width_rel
    return hw is not None and hw <= target


SKIPPED_WHY = (f"no call sites: the measured runs showed no mechanism candidate (under {FAULT_FLOOR:,} faults, "
               f"{FUTEX_FLOOR:,} futex calls and every memory syscall's floor), so there was nothing for call "
               "sites to explain")


def needs_call_sites(samples: list) -> bool:
    """Whether anything in a cell's measured runs could be a material mechanism whose call sites
    would explain it: a syscall above its floor, or enough faults or futex calls to cost."""
    ok = [s for s in samples if s.ok]
    if not ok:
        return False
    mid = sorted(ok, key=lambda s: s.wall_ns)[len(ok) // 2]
    return needs_arguments(samples) or mid.minflt >= FAULT_FLOOR or mid.syscalls["futex"] >= FUTEX_FLOOR


def needs_cpu_profile(samples: list) -> bool:
    """Whether a cell's measured runs spend enough kernel time for a mechanism in it to be material
    (analysis/cost.py): then its explaining run samples where that time goes."""
    from memsleuth.events import MATERIAL_SHARE, MIN_COST_NS
    ok = [s for s in samples if s.ok]
    if not ok:
        return False
    mid = sorted(ok, key=lambda s: s.wall_ns)[len(ok) // 2]
    return mid.sys_ns >= MIN_COST_NS and mid.sys_ns >= MATERIAL_SHARE * (mid.user_ns + mid.sys_ns)


def needs_user_profile(samples: list) -> bool:
    """Whether a cell's measured runs spend enough CPU time in user mode for a mechanism there (the
    allocator's own code, a runtime's collector) to be material: MIN_COST_NS at least."""
    from memsleuth.events import MIN_COST_NS
    ok = [s for s in samples if s.ok]
    return bool(ok) and sorted(s.user_ns for s in ok)[len(ok) // 2] >= MIN_COST_NS


def cpu_sample_us(samples: list) -> int:
    """The explaining run's sampling period: about CPU_SAMPLES samples of the measured runs' median
    CPU time, at 2 kHz at most and at least every CPU_PERIOD_MAX_US (so the count stays about the
    same up to 20 s of CPU time, and the samplers' cost with it). A sample is not free: on this
    project's VM (a guest's timer) the kernel-chain sampler made a 1.5 s fault-heavy program 6%
    slower at 500 us, 10% with the user-chain sampler beside it, 3% for both at 2 ms
    (docs/findings.md)."""
    ok = [s for s in samples if s.ok]
    cpu_ns = sorted(s.user_ns + s.sys_ns for s in ok)[len(ok) // 2] if ok else 0
    return int(min(max(cpu_ns / CPU_SAMPLES / 1000, 500), CPU_PERIOD_MAX_US))


def needs_arguments(samples: list) -> bool:
    """Whether a cell's measured runs make enough of a call whose finding is worded from its
    arguments (events.MECHANISM_FLOORS) to deserve one explaining run that records them."""
    ok = [s for s in samples if s.ok]
    if not ok:
        return False
    return any(sorted(s.syscalls[name] for s in ok)[len(ok) // 2] >= floor
               for name, floor in MECHANISM_FLOORS.items())


def needs_heap(samples: list) -> bool:
    """Whether a cell's measured runs hold enough resident memory for the memory findings (what
    it is made of) to speak: then its explaining run accounts the heap (heap.py)."""
    ok = [s for s in samples if s.ok]
    return bool(ok) and sorted(s.maxrss_kb for s in ok)[len(ok) // 2] * 1024 >= MEMORY_FLOOR_BYTES


def median_wall_s(samples: list) -> float | None:
    """The measured runs' median wall time in seconds, or None."""
    m = stats.median_of(s.wall_ns for s in samples if s.ok and s.wall_ns)
    return m / 1e9 if m is not None else None


def site_counts(ok: list) -> Counts:
    """The measured runs' median count of each event whose call sites are looked for."""
    from statistics import median
    counts = Counts({"page-faults": median(s.counters["page-faults-minor"] or s.minflt for s in ok)})
    for name in where.EVENTS:
        if name != "page-faults" and all(name in s.syscalls for s in ok):
            counts[name] = median(s.syscalls[name] for s in ok)
    return counts


# An explaining run records at most about this many calls' arguments per syscall: each record costs
# the calling thread the kernel's output path (~0.7 us here), so a storm of 350,000 madvise calls
# recorded at every call made the run 1.24x slower (bench/check_cost.py); 20,000 records estimate
# the calls' sizes and advice to well under 1%.
ARGS_RECORDS = 20_000
# The smallest P: a prime P samples a repeating pattern of calls evenly only when the pattern is
# shorter than P (P = 2 saw only one advice of a program alternating POPULATE_WRITE and NORMAL).
MIN_ARGS_EVERY = 31
SAMPLED_ARGS = ("munmap", "madvise", "mmap", "mremap")   # brk: every call, its moves are read in order
# The most page faults an explaining run traces: each fault enters the fault tracepoint, recorded or
# not (~0.18 us here: +10% on a program faulting 1.2 million times in 2.1 s, bench/check_cost.py);
# a run of more traces them in a random share of its ticks (ms-run --fault-share), scaled to all.
FAULT_TRACED = 500_000


def _prime_at_least(n: int) -> int:
    def prime(k: int) -> bool:
        return k >= 2 and all(k % d for d in range(2, int(k ** 0.5) + 1))
    while not prime(n):
        n += 1
    return n


def fault_share(counts: dict[str, float]) -> float | None:
    """The share of an explaining run's ticks in which its page faults are traced (about
    FAULT_TRACED faults), or None: all of them."""
    faults = Counts(counts)["page-faults"]
    return round(FAULT_TRACED / faults, 4) if faults > FAULT_TRACED else None


def args_every(counts: dict[str, float]) -> dict[str, int]:
    """{syscall: P} for an explaining run: the syscalls counted more than ARGS_RECORDS times have
    the arguments of one call in P recorded (P prime and at least MIN_ARGS_EVERY: a repeating
    pattern of calls shorter than P is sampled evenly), each standing for P calls."""
    out, counts = {}, Counts(counts)
    for name in SAMPLED_ARGS:
        n = counts[name]
        if n > ARGS_RECORDS:
            out[name] = _prime_at_least(max(MIN_ARGS_EVERY, int(-(-n // ARGS_RECORDS))))
    # The page faults, each looked up in the ranges released before it (ms-run's "faults"): every
    # one up to ARGS_RECORDS, else one in a prime P of them, of those traced (fault_share).
    faults = counts["page-faults"] * (fault_share(counts) or 1.0)
    if faults:
        out["faults"] = 1 if faults <= ARGS_RECORDS else _prime_at_least(int(-(-faults // ARGS_RECORDS)))
    return out


def _call_sites_under_perf(cell, ok: list) -> dict:
    """The fallback: one run of the cell under perf record, sampling rates from the measured runs."""
    timeout = max(60.0, (median_wall_s(ok) or 0.0) * where.TIMEOUT_FACTOR)
    return where.record(list(cell.command), dict(cell.env), cell.allocator.preload, site_counts(ok), timeout,
                        cell.stdin)


def rotated(idx: list[int], round_: int) -> list[int]:
    k = round_ % len(idx)
    return idx[k:] + idx[:k]


class _Progress:
    """What is running now, how far, and how long is left: a live bar on a terminal, a line
    every PLAIN_PROGRESS_EVERY_S seconds elsewhere. Cell labels are user text: never markup."""

    def __init__(self, console: Console, total: int):
        self.console = console
        self.total = total
        self.done = 0
        self.t0 = time.monotonic()
        self.last_line = self.t0
        self.bar = Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(), console=console,
                            transient=True, disable=not console.is_terminal)
        self.task = None

    def __enter__(self):
        self.bar.__enter__()
        self.task = self.bar.add_task("starting", total=self.total)
        return self

    def __exit__(self, *exc):
        return self.bar.__exit__(*exc)

    def now(self, what: str) -> None:
        what = visible(what)   # cell labels hold user text (allocator names, parameter values)
        self.bar.update(self.task, description=what)
        t = time.monotonic()
        if not self.console.is_terminal and t - self.last_line >= PLAIN_PROGRESS_EVERY_S:
            self.last_line = t
            elapsed = t - self.t0
            left = elapsed / self.done * (self.total - self.done) if self.done else None
            # Not a bound: the runs left may be slower (an explaining run) or fewer (adaptive rounds stop early).
            eta = (f", roughly {left:.0f} s left if all {self.total} runs are needed (from the pace so far)"
                   if left is not None else "")
            print(f"memsleuth: {self.done}/{self.total} runs, {elapsed:.0f} s elapsed{eta}; now: {what}",
                  file=sys.stderr, flush=True)

    def advance(self) -> None:
        self.done += 1
        self.bar.advance(self.task)

    def shrink(self, remaining: int) -> None:
        self.total = self.done + remaining
        self.bar.update(self.task, total=self.total)


def run(plan: Plan, store: Store, run_id: int, cell_ids: list[int], console: Console | None = None,
        reference_id: int | None = None, meanwhile: Callable[[], None] | None = None) -> Outcome:
    """`meanwhile`: work of the caller's that must not overlap a measured run, started in a thread
    as the explaining runs start (this process only waits for them then)."""
    console = console or Console(stderr=True)
    rounds = plan.rounds
    groups = [idx for _, idx in plan.groups()]
    values: dict[int, list[float]] = {i: [] for i in range(len(plan.cells))}
    samples: dict[int, list] = {i: [] for i in range(len(plan.cells))}
    by_round: list[dict[int, object]] = [{} for _ in plan.cells]
    failed: set[int] = set()
    counting: dict[int, list] = {i: [] for i in range(len(plan.cells))}   # the warm-ups that counted the syscalls
    reference = plan.reference if reference_id is not None else None
    # The explaining runs count too: at most one per cell (syscall arguments, heap accounting and
    # call sites together); the total only ever shrinks to what is really left.
    explaining = len(plan.cells)
    total = (len(plan.cells) + (reference is not None)) * (plan.warmup + rounds.max_reps) + explaining
    progress = _Progress(console, total)
    clock = Clock()

    def measure_reference(round_: int) -> None:
        """The reference cell, once per round (and once as warm-up): how fast the machine is now."""
        progress.now(f"{REFERENCE_LABEL}: " + ("warm-up" if round_ < 0 else f"round {round_ + 1}"))
        sample = launcher.run_cell(reference, timeout_s=plan.timeout_s, mem_limit_bytes=plan.mem_limit_bytes,
                                   syscalls=not plan.quiet_rounds)
        store.add_sample(reference_id, round_, round_ < 0, sample)
        progress.advance()

    def measure(i: int, round_: int, warmup: bool, what: str) -> None:
        cell = plan.cells[i]
        progress.now(f"{plan.label(i)}: {what}")
        # The warm-ups count the syscalls by name for the timed rounds, which count none (Plan.quiet_rounds).
        sample = launcher.run_cell(cell, timeout_s=plan.timeout_s, mem_limit_bytes=plan.mem_limit_bytes,
                                   metric=plan.metric, syscalls=warmup or not plan.quiet_rounds)
        store.add_sample(cell_ids[i], round_, warmup, sample)
        progress.advance()
        if warmup and sample.ok and sample.syscalls_counted:
            counting[i].append(sample)
        if warmup and not sample.ok:
            failed.add(i)
        elif not warmup and sample.ok:
            sample = with_counts(sample, counting[i])     # what the explaining run is chosen from
            values[i].append(sample.metric(metric_kind([sample])))
            samples[i].append(sample)
            by_round[i][round_] = sample

    holder = TracepointHolder()
    try:
        with holder, progress:
            clock.start("measured runs")
            if reference is not None:
                measure_reference(-1)
            for idx in groups:
                for i in idx:
                    cell = plan.cells[i]
                    progress.now(f"{plan.label(i)}: preload check")
                    bad = launcher.preload_failure(cell, launcher.check_preload(cell))
                    if bad is not None:  # the failure is the cell's result, stored as its warm-up
                        store.add_sample(cell_ids[i], -1, True, bad)
                        failed.add(i)
                        continue
                    for _ in range(plan.warmup):
                        if i not in failed:
                            measure(i, -1, True, "warm-up")
            if plan.quiet_rounds:
                # The counting is done: no syscall tracepoint stays registered through the timed rounds.
                progress.now("the warm-ups' syscall tracepoints let go (the timed rounds count no syscall)")
                holder.release()
            active = [list(idx) for idx in groups]
            for r in range(rounds.max_reps):
                if not active:
                    break
                if reference is not None:
                    measure_reference(r)
                for idx in active:
                    for i in rotated(idx, r):
                        if i not in failed:
                            measure(i, r, False, f"round {r + 1} of at most {rounds.max_reps}")
                if plan.settled is not None:
                    done = r + 1 >= rounds.min_reps and (len(failed) == len(plan.cells) or plan.settled(by_round))
                    active = [] if done else active
                else:
                    still = []
                    for idx in active:
                        live = [i for i in idx if i not in failed]
                        if live and not all(cell_settled(values[i], rounds.target_ci, rounds.min_reps) for i in live):
                            still.append(idx)
                    active = still
                # Shrink the bar to what can still run: finished groups and failed cells run no more.
                progress.shrink((sum(1 for idx in active for i in idx if i not in failed) + bool(active and reference))
                                * (rounds.max_reps - r - 1) + explaining)
            clock.start("explaining runs")
            # One explaining run per cell, after the measured ones and never mixed into them: the
            # syscalls' arguments, the heap's accounting and the call sites, together. `check`
            # (plan.explain_if_needed) explains only what its measured runs call for.
            todo = []
            for i, cell in enumerate(plan.cells):
                if i in failed or not values[i]:
                    continue
                wanted = (needs_call_sites(samples[i]) or needs_cpu_profile(samples[i])) \
                    if plan.explain_if_needed else True
                heap = cell.heap or (plan.heap and needs_heap(samples[i]))
                sites = bool(cell.where or (plan.where and wanted))
                args = bool(cell.where or (plan.syscall_args and wanted) or needs_arguments(samples[i]) or heap or sites)
                todo.append((i, cell, args, sites, heap))
            # `check` with nothing counted to explain still samples where the CPU time goes, in user mode too:
            # the allocator's own code, its clearing of zeroed blocks and a runtime's collector cost no
            # syscall or fault that a measured run counts (a C++ program building a 20,000-node map per request,
            # 4 MiB resident: malloc and free 21% of its time, perf ~20%, and no explaining run before)
            profile_only = {i for i, *_ in todo if plan.explain_if_needed and needs_user_profile(samples[i])}
            progress.shrink(sum(bool(a or i in profile_only) for i, _, a, _, _ in todo))
            if meanwhile is not None and any(a or i in profile_only for i, _, a, _, _ in todo):
                threading.Thread(target=meanwhile, name="meanwhile", daemon=True).start()
            # the explaining runs' own tracepoints held too: their closes at each run's end are then cheap
            with TracepointHolder(args=True) if any(a for _, _, a, _, _ in todo) else contextlib.nullcontext():
                for i, cell, args, sites, heap in todo:
                    if not args and i in profile_only:
                        progress.now(f"{plan.label(i)}: where the CPU time goes (one explaining run)")
                        explain = launcher.run_cell(cell, timeout_s=plan.timeout_s, mem_limit_bytes=plan.mem_limit_bytes,
                                                    cpu_sample_us=cpu_sample_us(samples[i]))
                        store.add_sample(cell_ids[i], EXPLAIN_ROUND, True, explain)
                        progress.advance()
                    if args:
                        what = ", ".join(w for w, on in (("syscall arguments", True), ("heap accounting", heap),
                                                         ("call sites", sites)) if on)
                        progress.now(f"{plan.label(i)}: {what} (one explaining run)")
                        counts = site_counts(samples[i])
                        every = args_every(counts)
                        wanted_periods = where.periods(counts, median_wall_s(samples[i])) if sites else {}
                        # The sampler rides this run where the kernel allows it (where.sampler_usable).
                        periods = wanted_periods if wanted_periods and where.sampler_usable() else None
                        sample_us = cpu_sample_us(samples[i])
                        share = fault_share(counts)
                        explain = launcher.run_cell(cell, timeout_s=plan.timeout_s, mem_limit_bytes=plan.mem_limit_bytes,
                                                    syscall_args=True, heap=heap, sites=periods, args_every=every,
                                                    fault_share=share, cpu_sample_us=sample_us)
                        if periods and not explain.ok:
                            # The measured run succeeded: the sampler may be what failed this one.
                            progress.now(f"{plan.label(i)}: {what} again, without the sampler ({explain.status})")
                            explain = launcher.run_cell(cell, timeout_s=plan.timeout_s,
                                                        mem_limit_bytes=plan.mem_limit_bytes, syscall_args=True, heap=heap,
                                                        args_every=every, fault_share=share, cpu_sample_us=sample_us)
                            periods = None
                        store.add_sample(cell_ids[i], EXPLAIN_ROUND, True, explain)
                        clock.move("explaining runs", "symbolization", float(explain.raw.get("read_s") or 0.0))
                        progress.advance()
                        if sites and not wanted_periods:
                            store.set_where(cell_ids[i], {"skipped": SKIPPED_WHY})     # nothing was counted
                        elif sites:
                            if periods and explain.where:
                                found = explain.where
                            elif not where.sampler_usable():
                                least = ".".join(map(str, where.SAMPLER_KERNEL))
                                found = {"unavailable": f"the in-program sampler needs Linux {least} or later (this "
                                                        f"kernel: {os.uname().release})"}
                            elif periods is None and wanted_periods:
                                found = {"unavailable": "the explaining run failed with the in-program sampler and was made "
                                                        "again without it"}
                            else:
                                found = {"unavailable": "the in-program sampler left no call sites"}
                            if "unavailable" in found:
                                progress.now(f"{plan.label(i)}: call sites under perf record ({found['unavailable']})")
                                clock.start("perf record (call sites' fallback)")
                                why = found["unavailable"]
                                found = _call_sites_under_perf(cell, samples[i])
                                # the report and the JSON say why a third run was made
                                found.setdefault("notes", []).insert(0, f"under perf record, one more run: {why}")
                                clock.start("explaining runs")
                            store.set_where(cell_ids[i], found)
                    if not sites and plan.where:
                        store.set_where(cell_ids[i], {"skipped": SKIPPED_WHY})
    except KeyboardInterrupt as e:
        store.finish_run(run_id, "interrupted", {"loadavg_1m_end": os.getloadavg()[0]}, {"timings": clock.done()})
        return Outcome(run_id, True, progress.done, stop_signal(e))
    store.finish_run(run_id, "complete", {"loadavg_1m_end": os.getloadavg()[0]}, {"timings": clock.done()})
    return Outcome(run_id, False, progress.done)
