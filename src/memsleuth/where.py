"""Call sites: where in the code the page faults and the memory system calls come from.

Gathered in the cell's one explaining run, after the measured runs, so that sampling never distorts
a measured figure. Two ways, the first preferred:

- In the program (native/heap/ms_sites.c, preloaded): each event is a perf event of the process
  with `sigtrap`, so the thread that caused every N-th event unwinds its own stack (the C runtime's
  unwinder reads .eh_frame: Debian's glibc has no frame pointers). It rides the explaining run
  that also records the syscall arguments and accounts the heap: no run and no perf start-up of
  its own. The stacks are named once per object (symbols.py). `read_sampled` reads them.
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

Each stack is read two ways: the user's call site (the first frame outside the C library, the C++
runtime, the dynamic loader and the allocator) and the allocator's internal path (its frames from
the entry point down to the system call: `free -> _int_free -> systrim -> sbrk`).
"""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections import Counter

from memsleuth import native, symbols
from memsleuth.events import SYSCALL_COLUMNS

TARGET_SAMPLES = 400       # per event: enough for the top sites' shares to be stable to a few %
LIGHT_CALLS = 4000         # a syscall counted at most this often is recorded at every call
STACK_BYTES = 8192         # user stack copied per sample for DWARF unwinding
TOP = 3                    # call sites kept per event and kind
STACKS = 200               # distinct stacks kept per event (the most sampled), for flame graphs and pprof
STACK_FRAMES = 48          # innermost frames kept of each
TIMEOUT_FACTOR = 20        # the perf run may take this many times the measured run (unwinding)
MAX_DATA = "64M"           # perf record --max-size: bounds a syscall storm's stacks (8 KiB each)
# Objects whose frames are not the user's code.
SYSTEM_DSOS = re.compile(r"(^|/)(libc\.so|libc-|ld-linux|ld-2|libpthread|libstdc\+\+|libgcc_s|libm\.so|"
                         r"libms(sites|heap)\.so|\[kernel|\[vdso|\[unknown\])")
# A stack goes "through the allocator" when a frame is the preloaded allocator's own object, or a
# malloc-family entry point or glibc malloc internal (libc's malloc is in libc.so with everything else).
ALLOCATOR_FRAMES = ("malloc", "free", "realloc", "calloc", "_int_", "sysmalloc", "systrim", "operator new",
                    "operator delete", "mi_", "je_", "tc_", "tcmalloc", "scalable_", "arena")
EVENTS = {"page-faults": "page-faults", **{s: f"syscalls:sys_enter_{s}" for s in SYSCALL_COLUMNS}}


LOST = "no frame of the program's own code (a runtime's own thread, the loader, or a stack that could not be unwound)"
# Below this share of stacks that reach the program's own code, the sites decide nothing.
MIN_UNWOUND = 0.5


def unwound_share(event: dict) -> float:
    """The share of an event's sampled stacks that reached a frame of the program's own code."""
    return 1.0 - sum(share for site, share in event.get("user_sites", []) if site == LOST)


def perf_path() -> str | None:
    return shutil.which("perf")


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


def periods(counts: dict[str, float]) -> dict[str, int]:
    """{event: period} for the sampler: about TARGET_SAMPLES samples of each event the measured
    runs counted, whatever the program's length."""
    out = {}
    for event in ("page-faults", *SYSCALL_COLUMNS):
        n = counts.get(event) or 0
        if n > 0:
            out[event] = max(1, int(n // TARGET_SAMPLES))
    return out


def sites_spec(periods_: dict[str, int]) -> str:
    """MEMSLEUTH_SITES for the sampler: 'page-faults=40,madvise=1'."""
    return ",".join(f"{event}={int(period)}" for event, period in periods_.items())


def at_rate(sites: dict[str, dict], counts: dict[str, float]) -> None:
    """Events sampled at a rate, not a period (attach): each event's period is then its count over
    the same window divided by its samples, so a stack's samples x period estimate its events."""
    for name, found in sites.items():
        if found.get("samples"):
            found["period"] = max(1, round(float(counts.get(name) or 0) / found["samples"]))


def read_sampled(folder: str, allocator: str | None, counts: dict[str, float] | None = None) -> dict:
    """The sampler's per-process documents as call sites per event (the shape `record` returns), or
    {"unavailable": why} when it took no sample to speak of (then perf record is the way).
    `counts`: the events counted over the same window, when the samples were taken at a rate
    (attach): each event's period is then its count over its samples."""
    docs = []
    for path in sorted(glob.glob(os.path.join(folder, "sites-*.json"))):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                doc = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("stacks"), list):
            docs.append(doc)
    if not docs:
        return {"unavailable": "the program left no sampled stacks (it ended without exit(), or the sampler did not "
                               "load)"}
    events = {e.get("name"): e for d in docs for e in d.get("events") or [] if isinstance(e, dict)}
    if not any(e.get("opened") for e in events.values()):
        why = "; ".join(f"{name}: {e.get('why')}" for name, e in events.items())
        return {"unavailable": f"the sampler could not open its events ({why})"}
    notes: list[str] = []
    named = symbols.resolve(docs, lambda d: [a for st in d["stacks"] if len(st) == 3 for a in st[2]], notes=notes)
    samples = []
    for d_i, d in enumerate(docs):
        names = [e.get("name") for e in d.get("events") or []]
        for st in d["stacks"]:
            if len(st) != 3 or not isinstance(st[0], int) or not 0 <= st[0] < len(names):
                continue
            frames = [f for a in st[2] for f in named.get((d_i, a), ())]
            samples.append((str(d.get("comm") or "?"), names[st[0]], frames, int(st[1])))
    sites = summarise(samples, allocator=allocator)
    for name, found in sites.items():
        found["period"] = int((events.get(name) or {}).get("period") or 1)
    if counts is not None:
        at_rate(sites, counts)
    notes += [f"{name}: not sampled ({e.get('why')})" for name, e in events.items() if not e.get("opened")]
    notes += language_notes(docs, samples)
    late = sum(int(d.get("async") or 0) for d in docs)
    if late:
        notes.append(f"{late} samples arrived while the program blocked SIGTRAP and were left out")
    outside = sorted({str(d.get("comm") or "?") for d in docs if d.get("sampled_by") == "kernel"})
    if outside:
        notes.append(f"sampled by the kernel, unwound by frame pointers (the in-program sampler could not load in "
                     f"them: a static executable, or a cleared environment): {', '.join(outside)}")
    own = any(d.get("sampled_by") != "kernel" for d in docs)
    return {"events": sites, "notes": notes, "sampler": "in-program" if own else "kernel"}


def plan_events(counts: dict[str, float]) -> list[tuple[list[str], int, int | None]]:
    """perf runs to make: (event names, default period, page-fault period or None)."""
    faults = counts.get("page-faults") or 0
    fault_period = max(1, int(faults // TARGET_SAMPLES)) if faults else None
    light = [s for s in SYSCALL_COLUMNS if 0 < (counts.get(s) or 0) <= LIGHT_CALLS]
    heavy = [s for s in SYSCALL_COLUMNS if (counts.get(s) or 0) > LIGHT_CALLS]
    runs = []
    if light or fault_period:
        runs.append((light, 1, fault_period))
    if heavy:  # every call is a sample anyway (see above); the run is bounded by MAX_DATA instead
        runs.append((heavy, 1, None))
    return runs


def record(command: list[str], env: dict[str, str], preload: str | None, counts: dict[str, float],
           timeout_s: float) -> dict:
    """Call sites per event for one command, or {"unavailable": why}."""
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
        with tempfile.TemporaryDirectory(prefix="memsleuth-where-") as tmp:
            data = os.path.join(tmp, "perf.data")
            argv = [perf, "record", "-q", "-o", data, f"--max-size={MAX_DATA}", "--call-graph", f"dwarf,{STACK_BYTES}",
                    "-c", str(period)]
            for e in events:
                argv += ["-e", e]
            try:
                rec = subprocess.run(argv + ["--", *wrapped], capture_output=True, text=True, errors="replace",
                                     stdin=subprocess.DEVNULL, timeout=timeout_s, env=run_env)
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
    tracepoint at every call; MAX_DATA bounds a storm). Its own files stay in `tmp`."""
    perf = perf_path()
    if perf is None:
        return None
    data = os.path.join(tmp, "perf.data")
    argv = [perf, "record", "-q", "-o", data, f"--max-size={MAX_DATA}", "--call-graph", f"dwarf,{STACK_BYTES}",
            "-p", ",".join(str(p) for p in pids), "-e", f"page-faults/period={max(1, int(fault_period))}/"]
    for s in SYSCALL_COLUMNS:
        argv += ["-e", EVENTS[s]]
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    try:   # its messages to a file: a pipe nobody reads while the window lasts could fill and stall it
        with open(data + ".err", "w") as err:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                    env=env, preexec_fn=_stop_with_parent)
    except OSError:
        return None
    return proc, perf, data


def _stop_with_parent() -> None:
    """In perf's child before exec: if memsleuth dies (even SIGKILL), perf gets SIGINT and detaches."""
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGINT), 0, 0, 0)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def stop_recorder(recorder, counts: dict[str, float]) -> dict | None:
    """The call sites perf recorded beside the window (`counts`: the window's, each event's period
    from them: at_rate), {"unavailable": why} when perf failed, None without perf or samples."""
    if recorder is None:
        return None
    proc, perf, data = recorder
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)   # perf writes what it has and exits
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
    notes.append("call sites from perf record (DWARF call graphs) beside the window")
    return {"events": sites, "notes": notes, "sampler": "perf record"} if sites else None


# perf script names each frame's function and object at once; the line numbers are ours
# (symbols.symbolize: only the sampled addresses, batched, cached), never perf's `srcline`, which
# ran addr2line over a 100 MB executable (node) for a minute and more.
SCRIPT_S = 20.0


def _script(perf: str, data: str, notes: list[str]):
    """perf script's stacks by function and object within SCRIPT_S, else None (said in `notes`): a
    slow perf script leaves the sites unnamed, it never ends the command."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    try:
        return subprocess.run([perf, "script", "--no-inline", "-i", data, "-F", "comm,pid,event,ip,sym,dso"],
                              capture_output=True,
                              text=True, errors="replace", timeout=SCRIPT_S, env=env)
    except subprocess.TimeoutExpired:
        notes.append(f"perf script did not finish within {SCRIPT_S:.0f} s: no call sites")
        return None


def parse(text: str) -> list[tuple[str, str, list[tuple[int, str, str]]]]:
    """perf script output -> [(comm, event, [(address in the object, symbol, object), innermost first])].
    perf gives a user frame's address in its object's file (the mapping's offset added)."""
    samples = []
    for block in text.split("\n\n"):
        lines = [x for x in block.splitlines() if x.strip()]
        if not lines:
            continue
        m = re.match(r"^(.*?)\s+(\d+)\s+(\S+):\s*$", lines[0].strip())
        if not m:
            continue
        frames = []
        for line in lines[1:]:
            fm = re.match(r"^\s*([0-9a-f]+)\s+(.*?)(?:\s+\((.*)\))?\s*$", line)
            if line.startswith("\t") and fm and fm.group(3) != "inlined":   # inlined frames are named by us
                frames.append((int(fm.group(1), 16), fm.group(2) or "[unknown]", fm.group(3) or ""))
        samples.append((m.group(1), m.group(3), frames))
    return samples


def name_perf_frames(samples, notes: list[str]) -> list[tuple[str, str, list[symbols.Frame]]]:
    """perf's frames as symbols.Frame, their lines and inlined frames from one batch symbolization
    of the sampled addresses (perf's own function name kept where the symbolizer has none)."""
    wanted: dict[str, set[int]] = {}
    for _, _, frames in samples:
        for k, (ip, _, dso) in enumerate(frames):
            if dso.startswith("/") and not re.search(r"/perf-\d+\.map$", dso):
                wanted.setdefault(dso, set()).add(symbols.file_address(dso, ip) - (k > 0))
    chains, why = symbols.symbolize(wanted) if wanted else ({}, [])
    notes.extend(why)
    out = []
    for comm, event, frames in samples:
        named: list[symbols.Frame] = []
        for k, (ip, sym, dso) in enumerate(frames):
            fn = None if sym in ("[unknown]", "") else _clean(sym)
            if re.search(r"/perf-\d+\.map$", dso):   # a runtime's compiled code, named by its perf map
                lang = symbols.language_frame(sym)
                named.append(symbols.Frame("[jit]", ip, *lang[1:], lang[0]) if lang else
                             symbols.Frame("[jit]", ip, sym, None))
                continue
            if not dso.startswith("/"):
                named.append(symbols.Frame(dso, ip, fn, None))
                continue
            # the innermost frame is the sampled pc itself; the others are return addresses
            key = symbols.file_address(dso, ip) - (k > 0)
            got = [f for f in symbols.resolve_chain(dso, key, chains.get((dso, key)))]
            if got[-1].function is None and fn:
                got[-1] = symbols.Frame(dso, key, fn, got[-1].line, got[-1].source)
            named += got
        out.append((comm, event, named))
    return out


def _clean(sym: str) -> str:
    sym = re.sub(r"^__GI___?", "", sym)
    sym = re.sub(r"^__libc_", "", sym)
    return re.sub(r"\+0x[0-9a-f]+$", "", sym)


def language_notes(docs: list[dict], samples) -> list[str]:
    """What the sites cannot say in the program's language, and why: an interpreter older than the
    one whose frames can be named (CPython before 3.12 has no perf trampolines)."""
    if any(f.language for _, _, frames, *_ in samples for f in frames):
        return []
    for d in docs:
        for m in d.get("maps") or []:
            found = re.match(r"^(?:libpython3\.(\d+)\S*\.so\S*|python3\.(\d+))$",
                             os.path.basename(str(m[3])) if len(m) >= 4 else "")
            minor = found and int(found.group(1) or found.group(2))
            if found and minor < 12:
                return [f"Python-level call sites need CPython 3.12 or later (PYTHONPERFSUPPORT); this program "
                        f"runs 3.{minor}: its sites are the interpreter's and its modules' C code"]
    return []


def summarise(samples, allocator: str | None = None) -> dict[str, dict]:
    """Per event: the top call sites (the program's own frame, and the frame that made the call
    beside it when they differ: symbols.program_site), who made the calls (those frames alone, for
    runtimes.runtime_of), the top internal paths, and the share of stacks that go through the
    allocator. `samples`: (command, event, [symbols.Frame] innermost first[, how many]).
    `allocator` is the preloaded library: its frames are the runtime's, never the user's call site,
    even when it is stripped."""
    # perf names the mapped file (the symlink's target); the user may have given either.
    alloc_names = {os.path.basename(allocator), os.path.basename(os.path.realpath(allocator))} if allocator else set()

    def is_allocator(f) -> bool:
        return os.path.basename(f.path or "") in alloc_names or any(k in _clean(f.function or "")
                                                                    for k in ALLOCATOR_FRAMES)

    def is_runtime(path: str) -> bool:
        return bool(SYSTEM_DSOS.search(path or "[unknown]")) or os.path.basename(path or "") in alloc_names

    by_event: dict[str, list] = {}
    stacks: dict[str, Counter] = {}
    for comm, event, frames, *weight in samples:
        w = weight[0] if weight else 1
        name = event.split("/")[0].split(":")[-1].replace("sys_enter_", "")
        users, makers, paths, comms, n, through = by_event.get(name, (Counter(), Counter(), Counter(), Counter(), 0, 0))
        frames = [f for f in frames if "[kernel" not in (f.path or "")]
        own, maker = symbols.program_site(frames, is_runtime)
        stacks.setdefault(name, Counter())[symbols.stack_entry(frames[:STACK_FRAMES], is_runtime)] += w
        inner = frames[:frames.index(maker)] if maker is not None else frames
        path = [_clean(f.function) for f in reversed(inner) if f.function]
        users[symbols.site_with_maker(own, maker) if own else LOST] += w
        makers[maker.text() if maker else own.text() if own else LOST] += w
        if path:
            paths[" -> ".join(dict.fromkeys(path))] += w
        comms[comm] += w
        by_event[name] = (users, makers, paths, comms, n + w, through + w * any(is_allocator(f) for f in inner))
    out = {}
    for name, (users, makers, paths, comms, n, through) in by_event.items():
        out[name] = {"samples": n, "through_allocator": through / n,
                     "user_sites": [[site, k / n] for site, k in users.most_common(TOP)],
                     "makers": [[site, k / n] for site, k in makers.most_common(TOP)],
                     "internal_paths": [[p, k / n] for p, k in paths.most_common(TOP)],
                     "commands": [[c, k / n] for c, k in comms.most_common(TOP)],
                     "stacks": [[[list(f) for f in st], k] for st, k in stacks[name].most_common(STACKS)]}
    return out


def lines_for(where: dict | None, event: str) -> list[str]:
    """Report lines for one event's call sites."""
    if not where:
        return []
    if "unavailable" in where:
        return [f"call sites not recorded: {where['unavailable']}"]
    e = (where.get("events") or {}).get(event)
    if not e:
        return []
    label = "page faults" if event == "page-faults" else f"{event} calls"
    if unwound_share(e) < MIN_UNWOUND:
        return [f"{label}: {1 - unwound_share(e):.0%} of {e['samples']} sampled stacks did not reach the program's "
                "own code (a runtime's own threads, stripped code, or unwinding that stopped): no call site to name"]
    out = [f"{label} come from (of {e['samples']} sampled stacks): " +
           "; ".join(f"{site} {share:.0%}" for site, share in e["user_sites"] if share >= 0.005)]
    if e["internal_paths"]:
        out.append(f"{label} inside the runtime/allocator: " +
                   "; ".join(f"{p} {share:.0%}" for p, share in e["internal_paths"][:2] if share >= 0.005))
    if len(e.get("commands") or []) > 1:
        out.append(f"{label} by command: " + ", ".join(f"{c} {share:.0%}" for c, share in e["commands"]))
    return out
