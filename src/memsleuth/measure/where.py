"""Call sites: where in the code the page faults and the memory system calls come from.

Gathered in the cell's one explaining run, after the measured runs, so that sampling never distorts
a measured figure. Two ways, the first preferred:

- In the program (native/heap/ms_sites.c, preloaded): each event is a perf event of the process
  with `sigtrap`, so the thread that caused every N-th event unwinds its own stack (the C runtime's
  unwinder reads .eh_frame: Debian's glibc has no frame pointers). It rides the explaining run
  that also records the syscall arguments and accounts the heap: no run and no perf start-up of
  its own. The stacks are named once per object (symbols.py). records/sites.py `read_sampled` reads them.
  The processes it cannot load in (a static executable, a program started with `env -i`) are
  sampled in the same run by the kernel (native/launcher/msr_sites.c: user call chains by frame
  pointers), in documents of the same shape.
- Under `perf record` with DWARF call graphs (`record`), when the sampler cannot run here
  (a kernel before 6.2: `sampler_usable`; events it cannot open; a program that left no document;
  an explaining run that failed with it).

Sampling is bounded by rate, never by a size cap that ends the program early: each event's
period comes from the measured runs' count so that about TARGET_SAMPLES are taken whatever the
program's length (`periods`). perf record is the exception: it records a system call at every call
(perf asks the kernel for the period with each sample, and the kernel then emits a tracepoint
sample on every hit; seen with perf 6.1: `-c 100` on 50,000 madvise calls gave 50,000 samples), so
there the calls counted more than LIGHT_CALLS times get a run of their own, which stops once its
data reaches MAX_DATA.

What the stacks say (the user's call site, the allocator's internal path) is read by
records/sites.py.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess

from memsleuth.measure import native, workdirs
from memsleuth.records.model import Counts
from memsleuth.records.sites import at_rate, name_perf_frames, parse, summarise
from memsleuth.events import SITE_FLOORS, SITE_RATE_FLOORS, SYSCALLS

TARGET_SAMPLES = 400       # per event: enough for the top sites' shares to be stable to a few %
MINOR_SAMPLES = 50         # per event below its finding's floor (periods): its top site, no more
LIGHT_CALLS = 4000         # a syscall counted at most this often is recorded at every call
STACK_BYTES = 8192         # user stack copied per sample for DWARF unwinding
TIMEOUT_FACTOR = 20        # the perf run may take this many times the measured run (unwinding)
MAX_DATA = "64M"           # perf record --max-size: bounds a syscall storm's stacks (8 KiB each)
# Beside an attached window perf copies a stack in the watched process at every memory syscall:
# an mmap storm (2,300 mappings a second) ran 25% slower in the window with 64 MiB, 19% with 16. 16 MiB
# is about 2,000 stacks, plenty for the sites' shares (scaled to the window's counts, at_rate), and
# bounds that cost to the window's first moments in a storm (bench/attach_overhead.py).
ATTACH_MAX_DATA = "16M"
EVENTS = {"page-faults": "page-faults", **{s: f"syscalls:sys_enter_{s}" for s in SYSCALLS}}


def perf_path() -> str | None:
    return shutil.which("perf")


def own_files(folder: str) -> dict[str, str]:
    """The environment that keeps a perf memsleuth starts to its own temporary folder: its build-id
    cache (records are made with --no-buildid-cache; this is where anything left would go) is never
    the user's $HOME/.debug."""
    return {"PERF_BUILDID_DIR": folder}


def library() -> str:
    """The in-program sampler, preloaded in explaining runs (native/heap/ms_sites.c)."""
    return str(native.native_path("libmssites.so"))


# sigtrap perf events exist from Linux 5.13; before 6.2 a thread that blocks SIGTRAP (servers often
# block every signal in their workers) is killed by one instead of receiving it late, so the
# sampler runs from 6.2 on and perf record does the work before that.
SAMPLER_KERNEL = (6, 2)


def sampler_usable(release: str | None = None) -> bool:
    """Whether this kernel can run the in-program sampler safely (SAMPLER_KERNEL)."""
    m = re.match(r"(\d+)\.(\d+)", release if release is not None else os.uname().release)
    return bool(m) and (int(m.group(1)), int(m.group(2))) >= SAMPLER_KERNEL


def periods(counts: dict[str, float], wall_s: float | None = None) -> dict[str, int]:
    """{event: period} for the sampler: about TARGET_SAMPLES samples of each event the measured
    runs counted, whatever the program's length; MINOR_SAMPLES of an event counted below the count
    from which it can be a finding (SITE_FLOORS), or below its rate (SITE_RATE_FLOORS, over the
    measured runs' `wall_s`). Each sample unwinds a stack in the program: node's start-up (442 futex
    and 408 mprotect calls, neither a finding's) took 1,100 of a check's 2,000. And a futex sample
    disturbs the waits: a node program of 2.3 s and 1,100 futex calls (480 a second), every second call
    sampled, made ~290 more futex calls and ~250 more voluntary context switches (as if waits were
    restarted after the sample's SIGTRAP: read from the counts, not traced) and ran 0.28 s longer
    (12 interleaved rounds)."""
    out, counts = {}, Counts(counts)
    for event in ("page-faults", *SYSCALLS):
        n = counts[event]
        if n > 0:
            rate = SITE_RATE_FLOORS.get(event)
            full = n >= SITE_FLOORS.get(event, 0) and not (rate and wall_s and n / wall_s < rate)
            target = TARGET_SAMPLES if full else MINOR_SAMPLES
            out[event] = max(1, int(n // target))
    return out


def sites_spec(periods_: dict[str, int]) -> str:
    """MEMSLEUTH_SITES for the sampler: 'page-faults=40,madvise=1'."""
    return ",".join(f"{event}={int(period)}" for event, period in periods_.items())


def plan_events(counts: dict[str, float]) -> list[tuple[list[str], int, int | None]]:
    """perf runs to make: (event names, default period, page-fault period or None)."""
    counts = Counts(counts)
    faults = counts["page-faults"]
    fault_period = max(1, int(faults // TARGET_SAMPLES)) if faults else None
    light = [s for s in SYSCALLS if 0 < counts[s] <= LIGHT_CALLS]
    heavy = [s for s in SYSCALLS if counts[s] > LIGHT_CALLS]
    runs = []
    if light or fault_period:
        runs.append((light, 1, fault_period))
    if heavy:  # every call is a sample anyway (see above); the run is bounded by MAX_DATA instead
        runs.append((heavy, 1, None))
    return runs


def record(command: list[str], env: dict[str, str], preload: str | None, counts: dict[str, float],
           timeout_s: float, stdin: str | None = None) -> dict:
    """Call sites per event for one command, or {"unavailable": why}; `stdin`, the file it reads as
    its standard input (else /dev/null)."""
    perf = perf_path()
    if perf is None:
        return {"unavailable": "perf is not installed (Debian: apt-get install linux-perf)"}
    sites: dict[str, dict] = {}
    notes: list[str] = []
    # The command is perf's own child, with the environment given to perf (not through `env`:
    # perf's DWARF unwinding was seen to lose the stacks of a process after an exec).
    run_env = {**os.environ, **env, **({"LD_PRELOAD": preload} if preload else {})}
    wrapped = list(command)
    for syscalls, period, fault_period in plan_events(counts):
        events = [EVENTS[s] for s in syscalls]
        if fault_period:
            events.append(f"page-faults/period={fault_period}/")
        if not events:
            continue
        with workdirs.workdir("where") as tmp:
            data = os.path.join(tmp, "perf.data")
            argv = [perf, "record", "-q", "--no-buildid-cache", "--no-buildid", "-o", data, f"--max-size={MAX_DATA}",
                    "--call-graph", f"dwarf,{STACK_BYTES}", "-c", str(period)]
            for e in events:
                argv += ["-e", e]
            try:
                with open(stdin or os.devnull, "rb") as given:    # each run reads it from its start
                    rec = subprocess.run(argv + ["--", *wrapped], capture_output=True, text=True, errors="replace",
                                         stdin=given, timeout=timeout_s, env={**run_env, **own_files(tmp)})
            except subprocess.TimeoutExpired:
                notes.append(f"perf record did not finish within {timeout_s:.0f} s")
                continue
            if not os.path.exists(data):
                why = (rec.stderr.strip().splitlines() or ["no data"])[-1]
                return {"unavailable": f"perf record failed: {why}"}
            out = _script(perf, data, notes)
            if out is None:
                continue
        for event, found in summarise(name_perf_frames(parse(out.stdout), notes), allocator=preload).items():
            found["period"] = fault_period if event == "page-faults" else period
            sites[event] = found
    return {"events": sites, "notes": notes}


# check --pid: perf record beside the attached window, DWARF call graphs (the kernel's own chains
# follow frame pointers, which a C library built without them breaks).


def attach_recorder(pids: list[int], tmp: str, fault_period: int):
    """perf record on running processes for the window (stopped by stop_recorder), or None
    without perf: the page faults one in `fault_period`, each memory syscall (perf records a
    tracepoint at every call; ATTACH_MAX_DATA bounds a storm). Its own files stay in `tmp`."""
    perf = perf_path()
    if perf is None or not _runs(perf):
        return None
    data = os.path.join(tmp, "perf.data")
    argv = [perf, "record", "-q", "--no-buildid-cache", "--no-buildid", "-o", data, f"--max-size={ATTACH_MAX_DATA}",
            "--call-graph",
            f"dwarf,{STACK_BYTES}", "-p", ",".join(str(p) for p in pids),
            "-e", f"page-faults/period={max(1, int(fault_period))}/"]
    for s in SYSCALLS:
        argv += ["-e", EVENTS[s]]
    env = {**{k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}, **own_files(tmp)}
    try:   # its messages to a file: a pipe nobody reads while the window lasts could fill and stall it
        with open(data + ".err", "w") as err:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                    env=env, preexec_fn=_stop_with_parent)
    except OSError:
        return None
    return proc, perf, data


def _runs(perf: str) -> bool:
    """Whether `perf` runs here: Debian's /usr/bin/perf is a wrapper that fails where the perf of
    the running kernel's version is not installed."""
    try:
        return subprocess.run([perf, "--version"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _stop_with_parent() -> None:
    """In perf's child before exec: if memsleuth dies (even SIGKILL), perf gets SIGINT and detaches."""
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGINT), 0, 0, 0)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def signal_recorder(recorder) -> None:
    """Tells perf to stop (it writes what it has and exits); stop_recorder waits for it."""
    proc = recorder[0] if recorder else None
    if proc is not None and proc.poll() is None:
        try:
            proc.send_signal(signal.SIGINT)
        except OSError:
            pass


def stop_recorder(recorder, counts: dict[str, float]) -> dict | None:
    """The call sites perf recorded beside the window (`counts`: the window's, each event's period
    from them: at_rate), {"unavailable": why} when perf failed, None without perf or samples."""
    if recorder is None:
        return None
    proc, perf, data = recorder
    signal_recorder(recorder)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if not os.path.exists(data):
        try:
            with open(data + ".err", encoding="utf-8", errors="replace") as f:
                why = (f.read().strip().splitlines() or ["no data"])[-1]
        except OSError:
            why = "no data"
        return {"unavailable": f"perf record beside the window failed: {why}"}
    notes: list[str] = []
    out = _script(perf, data, notes)
    if out is None:
        return None
    sites = summarise(name_perf_frames(parse(out.stdout), notes))
    at_rate(sites, counts)
    notes.append("from perf record (DWARF call graphs) beside the window")
    return {"events": sites, "notes": notes, "sampler": "perf record"} if sites else None


# perf script names each frame's function and object at once; the line numbers are ours
# (symbols.symbolize: only the sampled addresses, batched, cached), never perf's `srcline`, which
# ran addr2line over a 100 MB executable (node) for a minute and more.
SCRIPT_S = 20.0


def _script(perf: str, data: str, notes: list[str]):
    """perf script's stacks by function and object within SCRIPT_S, else None (said in `notes`): a
    slow perf script leaves the sites unnamed, it never ends the command."""
    env = {**{k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}, **own_files(os.path.dirname(data))}
    try:
        return subprocess.run([perf, "script", "--no-inline", "-i", data, "-F", "comm,pid,event,ip,sym,dso"],
                              capture_output=True,
                              text=True, errors="replace", timeout=SCRIPT_S, env=env)
    except subprocess.TimeoutExpired:
        notes.append(f"perf script did not finish within {SCRIPT_S:.0f} s: no call sites")
        return None


