"""check --pid: a window on processes that are already running, measured and stored as a check run.

Nothing is started, stopped or signalled: ms-run --attach opens the kernel's events on every
thread of each process (and, inherited, on the threads and processes they create in the window),
reads them for the window and closes them (launcher.attach_window); perf record beside it gives
the call sites. The window is the run's only sample: measured and explaining at once, so it is
stored as both (the rules read the syscalls' arguments and the CPU samples from the explaining
run). What an attach cannot give is said in the run's facts: the live heap needs the accounting
library loaded at the program's start.
"""
from __future__ import annotations

import os
import sys
import time

from memsleuth.measure import allocators, machine
from memsleuth.errors import UsageError
from memsleuth.records.proc import start_time, stat_fields, task_dir
from memsleuth.records.stored import EXPLAIN_ROUND

PF_KTHREAD = 0x00200000     # /proc/PID/stat flags: a kernel thread
# What resident memory is made of, by mapping kind (/proc/PID/smaps): the kind of each mapping.
SMAPS_KINDS = ("heap (brk)", "anonymous", "stacks", "file-backed", "shared memory")
# Allocators recognised in a running process by the library it has mapped.
MAPPED_ALLOCATORS = (("libjemalloc", "jemalloc"), ("libmimalloc", "mimalloc"), ("libtcmalloc", "tcmalloc"),
                     ("libtbbmalloc", "tbbmalloc"))


def read_if_same(pid: int, started: int | None, read):
    """read(pid), where pid still names the process that started at `started` before and after the
    read (a pid reused by another process in between is never read); None otherwise."""
    if started is None or start_time(pid) != started:
        return None
    value = read(pid)
    return value if start_time(pid) == started else None


def _stat(pid: int) -> tuple[int, int] | None:
    """(flags, uid) of a process, or None when there is none."""
    fields = stat_fields(pid)
    try:
        return int(fields[6]), os.stat(f"/proc/{pid}").st_uid
    except (TypeError, OSError, IndexError, ValueError):
        return None


# ms-run attaches to at most this many processes in one window (native/launcher/msr.h MSR_MAX_ATTACH).
MAX_PIDS = 64
# The files ms-run opens for a window: per thread, its counters (software events and the syscall
# tracepoints) and, per thread and CPU, the samplers' events (arguments, CPU time, call sites); and
# its own few (measured: 46 per thread on 2 CPUs, 4,651 for 101 threads) and the tree's stat and
# statm files it keeps open between ticks (at most 128: two for each of msr_tree.c's KEPT_MAX
# processes). Counted before the window opens, so that a target with thousands of threads gets a
# raised limit or one line, never a window that opened nothing ("Too many open files").
FDS_PER_THREAD, FDS_PER_THREAD_AND_CPU, FDS_OWN = 12, 17, 256


def _tree(pids: list[int]) -> set[int]:
    """The processes and every process below them (ms-run's window covers the whole tree)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := stat_fields(int(entry))) is not None:
            try:
                children.setdefault(int(fields[1]), []).append(int(entry))
            except (IndexError, ValueError):
                continue
    out, todo = set(), list(pids)
    while todo:
        p = todo.pop()
        if p not in out:
            out.add(p)
            todo += children.get(p, [])
    return out


def open_files_for(pids: list[int]) -> None:
    """Raises this process's open-file limit (ms-run inherits it) to what a window on these
    processes' threads needs, as far as it may; one line (UsageError) where even that is too low."""
    import resource
    threads = sum(_live_threads(p) for p in _tree(pids))
    need = threads * (FDS_PER_THREAD + FDS_PER_THREAD_AND_CPU * (os.cpu_count() or 1)) + FDS_OWN
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= need:
        return
    ceiling = hard
    if os.geteuid() == 0:           # root may raise the hard limit too, up to the kernel's
        try:
            with open("/proc/sys/fs/nr_open") as f:
                ceiling = max(hard, int(f.read()))
        except (OSError, ValueError):
            pass
    want = min(need, ceiling) if ceiling != resource.RLIM_INFINITY else need
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(want, hard) if hard != resource.RLIM_INFINITY else hard))
    except (ValueError, OSError):
        want = soft
    if want < need:
        raise UsageError(f"--pid: a window on {threads:,} threads needs about {need:,} open files, and this process may "
                         f"open {want:,}: raise `ulimit -n` (beyond the hard limit needs CAP_SYS_RESOURCE), or attach "
                         "to a smaller tree of processes")


def _ancestors() -> set[int]:
    """memsleuth's parent, its parent, ... (a window on one of them would count memsleuth's own work)."""
    out, pid = set(), os.getppid()
    while pid > 1 and pid not in out:
        out.add(pid)
        fields = stat_fields(pid)
        try:
            pid = int(fields[1])
        except (TypeError, IndexError, ValueError):
            break
    return out


def validate(pids: list[int]) -> list[int]:
    """The processes to attach to, each checked: one line (UsageError, exit 2) for the first that
    cannot be."""
    out: list[int] = []
    if len(set(pids)) > MAX_PIDS:
        raise UsageError(f"--pid names {len(set(pids))} processes: one window takes at most {MAX_PIDS}")
    ancestors = _ancestors()
    for pid in pids:
        if pid <= 0:
            raise UsageError(f"--pid {pid}: not a process id")
        if pid == os.getpid():
            raise UsageError(f"--pid {pid} is memsleuth itself: give the process to measure")
        if pid in ancestors:
            raise UsageError(f"--pid {pid} started memsleuth (it is its parent or above): a window on it would "
                             "count memsleuth's own work; run memsleuth from another shell")
        st = _stat(pid)
        if st is None:
            raise UsageError(f"--pid {pid}: no such process")
        flags, uid = st
        if (stat_fields(pid) or ["?"])[0] in ("Z", "X") and _live_threads(pid) == 0:
            raise UsageError(f"--pid {pid} has exited (a zombie its parent has not reaped): there is nothing to "
                             "measure")
        if flags & PF_KTHREAD:
            raise UsageError(f"--pid {pid} is a kernel thread: it has no user memory or code to measure")
        try:
            os.kill(pid, 0)        # signal 0: a permission check only, nothing is sent
        except PermissionError:
            raise UsageError(f"--pid {pid} belongs to another user (uid {uid}): attaching needs that user or root")
        except ProcessLookupError:
            raise UsageError(f"--pid {pid}: no such process") from None
        if os.geteuid() != 0 and uid != os.geteuid():
            raise UsageError(f"--pid {pid} belongs to another user (uid {uid}): attaching needs that user or root")
        if pid not in out:
            out.append(pid)
    open_files_for(out)
    return out


def _live_threads(pid: int) -> int:
    """The process's threads that have not exited (its main thread can exit while others run)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    return sum(1 for t in tids if (stat_fields(int(t)) or ["Z"])[0] not in ("Z", "X"))


def command_of(pid: int) -> list[str]:
    """The process's command line (its name in brackets when it has none to show)."""
    try:
        with open(f"{task_dir(pid)}/cmdline", "rb") as f:
            args = [a.decode("utf-8", "surrogateescape") for a in f.read().split(b"\0") if a]
    except OSError:
        args = []
    if args:
        return args
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return [f"[{f.read().strip()}]"]
    except OSError:
        return [f"[pid {pid}]"]


def allocator_of(pid: int):
    """The allocator a running process has mapped (glibc's malloc when none of the others)."""
    try:
        with open(f"{task_dir(pid)}/maps", encoding="utf-8", errors="replace") as f:
            maps = f.read()
    except OSError:
        maps = ""
    for lib, name in MAPPED_ALLOCATORS:
        if lib in maps:
            found = [a for a in allocators.available() if a.name == name]
            if found:
                return found[0]
    return allocators.resolve("glibc")[0]


def _mappings(pid: int) -> list[dict] | None:
    """/proc/PID/smaps, a dict per mapping: start, end, perms, name, and its Rss, AnonHugePages and
    Swap in bytes; None when it cannot be read."""
    try:
        with open(f"{task_dir(pid)}/smaps", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    out: list[dict] = []
    for line in lines:
        head = line.split()
        if not head:
            continue
        if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
            lo, hi = (int(x, 16) for x in head[0].split("-"))
            out.append({"start": lo, "end": hi, "perms": head[1], "name": head[5] if len(head) > 5 else "",
                        "Rss": 0, "AnonHugePages": 0, "Swap": 0})
        elif out and head[0][:-1] in ("Rss", "AnonHugePages", "Swap") and len(head) > 1 and head[1].isdigit():
            out[-1][head[0][:-1]] = int(head[1]) * 1024
    return out


def _kind(m: dict) -> str | None:
    """A mapping's kind (SMAPS_KINDS), None for the kernel's own ([vdso], [vvar], [vsyscall])."""
    name = m["name"]
    if name == "[heap]":
        return "heap (brk)"
    if name.startswith("[stack"):
        return "stacks"
    if m["perms"][3:4] == "s" or name.startswith(("/dev/shm", "/SYSV", "/memfd:")):
        return "shared memory"
    if name.startswith("/"):
        return "file-backed"
    return None if name.startswith("[") else "anonymous"


def smaps(pid: int) -> dict | None:
    """What the process's resident memory is made of now, by mapping kind, in bytes: {kind: rss},
    with "huge pages" (anonymous memory in transparent huge pages) and "swap" beside them."""
    maps = _mappings(pid)
    if maps is None:
        return None
    out = {k: 0 for k in SMAPS_KINDS}
    out["huge pages"] = out["swap"] = 0
    for m in maps:
        kind = _kind(m)
        if kind is not None:
            out[kind] += m["Rss"]
            out["huge pages"] += m["AnonHugePages"]
            out["swap"] += m["Swap"]
    return out


# perf samples the page faults by period (its rate mode gave a handful of samples here): the rate
# read from /proc over FAULT_PROBE_S before the window sizes it for about ATTACH_FAULT_SAMPLES_S a second.
FAULT_PROBE_S = 0.2
ATTACH_FAULT_SAMPLES_S = 100


def fault_rate(pids: list[int]) -> float:
    """The processes' page faults a second now (their minor faults over FAULT_PROBE_S)."""
    def faults() -> int:
        return sum(int(f[7]) for f in map(stat_fields, pids) if f and len(f) > 7 and f[7].isdigit())
    before = faults()
    time.sleep(FAULT_PROBE_S)
    return max(0, faults() - before) / FAULT_PROBE_S


def fault_period(rate: float) -> int:
    """perf's page-fault period for about ATTACH_FAULT_SAMPLES_S samples a second at `rate`."""
    return max(1, int(rate / ATTACH_FAULT_SAMPLES_S))


# glibc's other arenas live in heaps of HEAP_MAX bytes, each aligned to its size (64-bit: 2 x the
# largest mmap threshold, 32 MiB), each starting with its heap_info: {arena, previous heap, size,
# mprotect_size}. Read from the process's memory (/proc/PID/mem: the access process_vm_readv
# needs), never written; the main arena is the break's heap.
HEAP_MAX = 64 << 20


def arenas(pid: int) -> dict | None:
    """glibc's arenas of a running process: {"main_arena_rss", "arenas", "arena_rss"} in bytes and
    counts, or None where its memory cannot be read."""
    import struct
    maps = _mappings(pid)
    if maps is None:
        return None
    rss = {m["start"]: m["Rss"] for m in maps}
    main = sum(m["Rss"] for m in maps if m["name"] == "[heap]")
    heaps = {}
    try:
        with open(f"{task_dir(pid)}/mem", "rb", buffering=0) as mem:
            for m in maps:
                lo = m["start"]
                if m["name"] or not m["perms"].startswith("rw") or lo % HEAP_MAX:
                    continue
                try:
                    mem.seek(lo)
                    ar_ptr, prev, size, mprotect_size = struct.unpack("<QQQQ", mem.read(32))
                except (OSError, struct.error):
                    continue
                if 0 < size <= HEAP_MAX and size <= mprotect_size <= HEAP_MAX and (prev == 0 or prev % HEAP_MAX == 0):
                    heaps[lo] = (ar_ptr, prev)
    except OSError:
        return None
    # an arena's first heap holds the arena itself (prev 0, its ar_ptr inside it); later heaps point back
    first = {lo: ar for lo, (ar, prev) in heaps.items() if prev == 0 and lo <= ar < lo + HEAP_MAX}
    owned = [lo for lo, (ar, _) in heaps.items() if ar in first.values()]
    return {"main_arena_rss": main, "arenas": len(first), "arena_rss": sum(rss.get(lo, 0) for lo in owned)}


def run(store, pids: list[int], duration_s: float | None, argv: list[str]) -> tuple[int, int | None]:
    """Measures the window and stores it as a check run: (its id, the signal that ended it or None).
    Returns with the stop signals still blocked (launcher.STOP_SIGNALS): the caller unblocks them,
    after which a second Ctrl-C can end the report but no longer the stored window."""
    from memsleuth import __version__
    from memsleuth.measure import launcher
    from memsleuth.records.model import RunSpec
    from memsleuth.textsafe import visible
    started = {p: start_time(p) for p in pids}
    command = command_of(pids[0])
    alloc = allocator_of(pids[0])
    before = {p: read_if_same(p, started[p], smaps) for p in pids}
    # The command line is the target's own text: shown with its control characters escaped.
    print(f"memsleuth: attached to {', '.join(str(p) for p in pids)} ({visible(command[0][:200])}) "
          + (f"for {duration_s:g} s" if duration_s else "until Ctrl-C") + "; nothing is stopped or signalled",
          file=sys.stderr, flush=True)
    clock = {"start": time.monotonic()}

    def ended(seconds: float) -> None:
        clock["ended"] = time.monotonic()
        print(f"memsleuth: the window ended after {seconds:.1f} s; naming its call sites and reading the "
              "processes' memory", file=sys.stderr, flush=True)

    rate = fault_rate(pids)
    sample, where, stopped_by = launcher.attach_window(pids, duration_s, fault_period(rate), ended, rate)
    named = time.monotonic()
    # Read at the end only where the pid still names the process that was attached to.
    after = {p: read_if_same(p, started[p], smaps) for p in pids}
    window = sample.wall_ns / 1e9
    ended = (sample.raw or {}).get("attached") or {}
    if not sample.ok:        # nothing was measured: the window failed, and says why
        ended = {**ended, "ended_by": "failed", "why": sample.detail}
    glibc_arenas = {str(p): a for p in pids if (a := read_if_same(p, started[p], arenas)) is not None}
    # where the command's time went (--verbose, the JSON's timings), as check's runs say it
    ended_at = clock.get("ended", named)
    timings = {"window (with the rate probe)": round(ended_at - clock["start"], 3),
               "perf's stop and the call sites": round(named - ended_at, 3),
               "memory maps and arenas": round(time.monotonic() - named, 3)}
    facts = {"timings": timings, "attached": {"pids": pids, "duration_s": duration_s, "window_s": round(window, 3), **ended,
                          "smaps": {str(p): after[p] or before[p] for p in pids if after[p] or before[p]},
                          **({"arenas": glibc_arenas} if alloc.name == "glibc" else {}),
                          "cannot": "the live heap (allocations, live bytes, their sites): the accounting library "
                                    "must be loaded when the program starts"}}
    spec = RunSpec(rounds=f"one window of {window:.1f} s on running processes", reps=1, warmup=0,
                   command=command, facts=facts)
    run_id = store.begin_run(kind="check", name=os.path.basename(command[0]), argv=argv, spec=spec,
                             machine=machine.info([allocators.allocator_info(alloc)]), version=__version__)
    cell = store.add_cell(run_id, 0, allocator=allocators.allocator_info(alloc), params={}, env={}, command=command)
    store.add_sample(cell, 0, False, sample)
    store.add_sample(cell, EXPLAIN_ROUND, True, sample)    # the window explains itself
    store.set_where(cell, where)
    store.finish_run(run_id, "complete" if sample.ok else "failed", {"loadavg_1m_end": os.getloadavg()[0]})
    return run_id, stopped_by
