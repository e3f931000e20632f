"""Call sites: where in the code the page faults and the memory system calls come from.

Gathered in the cell's one explaining run, after the measured runs, so that sampling never distorts
a measured figure. Two ways, the first preferred:

- In the program (native/heap/ms_sites.c, preloaded): each event is a perf event of the process
  with `sigtrap`, so the thread that caused every N-th event unwinds its own stack (the C runtime's
  unwinder reads .eh_frame: Debian's glibc has no frame pointers). It rides the explaining run
  that also records the syscall arguments and accounts the heap: no run and no perf start-up of
  its own. The stacks are named once per object (symbols.py). `read_sampled` reads them.
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
import subprocess
import tempfile
from collections import Counter

from memsleuth import native, symbols
from memsleuth.events import SYSCALL_COLUMNS

TARGET_SAMPLES = 400       # per event: enough for the top sites' shares to be stable to a few %
LIGHT_CALLS = 4000         # a syscall counted at most this often is recorded at every call
STACK_BYTES = 8192         # user stack copied per sample for DWARF unwinding
TOP = 3                    # call sites kept per event and kind
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


LOST = "no frame outside the runtime (the loader, or a stack perf could not unwind)"
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


def read_sampled(folder: str, allocator: str | None) -> dict:
    """The sampler's per-process documents as call sites per event (the shape `record` returns), or
    {"unavailable": why} when it took no sample to speak of (then perf record is the way)."""
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
    named = symbols.resolve(docs, lambda d: [a for st in d["stacks"] if len(st) == 3 for a in st[2]])
    samples = []
    for d_i, d in enumerate(docs):
        names = [e.get("name") for e in d.get("events") or []]
        for st in d["stacks"]:
            if len(st) != 3 or not isinstance(st[0], int) or not 0 <= st[0] < len(names):
                continue
            frames = []
            for a in st[2]:
                f = named.get((d_i, a))
                if f is not None:
                    frames.append((f.function or "[unknown]", f.path,
                                   f.line or (f"{f.object}[{hex(f.offset)}]" if f.function is None else "")))
            samples.append((str(d.get("comm") or "?"), names[st[0]], frames, int(st[1])))
    sites = summarise(samples, allocator=allocator)
    for name, found in sites.items():
        found["period"] = int((events.get(name) or {}).get("period") or 1)
    notes = [f"{name}: not sampled ({e.get('why')})" for name, e in events.items() if not e.get("opened")]
    late = sum(int(d.get("async") or 0) for d in docs)
    if late:
        notes.append(f"{late} samples arrived while the program blocked SIGTRAP and were left out")
    return {"events": sites, "notes": notes, "sampler": "in-program"}


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
        for event, found in summarise(parse(out.stdout), allocator=preload).items():
            found["period"] = fault_period if event == "page-faults" else period
            sites[event] = found
    return {"events": sites, "notes": notes}


# perf script's line numbers run addr2line over each object a sample names: over a 100 MB executable
# (node) that took a minute and more. Past this budget the sites are named by function and object.
SYMBOLIZE_S = 20.0


def _script(perf: str, data: str, notes: list[str]):
    """perf script's stacks, with line numbers within SYMBOLIZE_S, else by function and object
    within another SYMBOLIZE_S (said in `notes`), else None (said too): a slow symbolization
    leaves the sites unnamed, it never ends the command."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    for fields, why in (("comm,pid,event,ip,sym,dso,srcline", None),
                        ("comm,pid,event,ip,sym,dso", f"line numbers took over {SYMBOLIZE_S:.0f} s (addr2line over a "
                                                      "large object): the sites are named by function and object")):
        try:
            out = subprocess.run([perf, "script", "-i", data, "-F", fields], capture_output=True, text=True,
                                 errors="replace", timeout=SYMBOLIZE_S, env=env)
        except subprocess.TimeoutExpired:
            continue
        if why:
            notes.append(why)
        return out
    notes.append(f"perf script did not finish within {2 * SYMBOLIZE_S:.0f} s: no call sites")
    return None


def parse(text: str) -> list[tuple[str, str, list[tuple[str, str, str]]]]:
    """perf script output -> [(comm, event, [(symbol, dso, srcline), innermost first])]."""
    samples = []
    for block in text.split("\n\n"):
        lines = [x for x in block.splitlines() if x.strip()]
        if not lines:
            continue
        head = lines[0].strip()
        m = re.match(r"^(.*?)\s+(\d+)\s+(\S+):\s*$", head)
        if not m:
            continue
        comm, event = m.group(1), m.group(3)
        frames: list[list[str]] = []   # [ip, symbol, dso, srcline]
        for line in lines[1:]:
            fm = re.match(r"^\s*([0-9a-f]+)\s+(.*?)(?:\s+\((.*)\))?\s*$", line)
            if line.startswith("\t") and fm:
                frames.append([fm.group(1), fm.group(2) or "[unknown]", fm.group(3) or "", ""])
            elif frames and not frames[-1][3]:
                frames[-1][3] = line.strip().replace(" (inlined)", "")
        # perf prints the object only on the real frame of an address; the frames inlined at the
        # same address belong to the same object.
        by_ip = {f[0]: f[2] for f in frames if f[2]}
        samples.append((comm, event, [(f[1], f[2] or by_ip.get(f[0], ""), f[3]) for f in frames]))
    return samples


def _clean(sym: str) -> str:
    sym = re.sub(r"^__GI___?", "", sym)
    sym = re.sub(r"^__libc_", "", sym)
    return re.sub(r"\+0x[0-9a-f]+$", "", sym)


def _site(frame: tuple[str, str, str]) -> str:
    sym, dso, src = frame
    if sym in ("[unknown]", ""):
        # perf gives a stripped object's frames as object[offset]
        m = re.search(r"\[(?:0x)?([0-9a-f]+)\]$", src or "")
        return symbols.site_text(None, dso, None, int(m.group(1), 16) if m else None)
    return symbols.site_text(_clean(sym), dso, src if src and not src.startswith("??") else None)


def summarise(samples, allocator: str | None = None) -> dict[str, dict]:
    """Per event: the top user call sites, the top internal paths, and the share of stacks that go
    through the allocator. `samples`: (command, event, frames innermost first[, how many]).
    `allocator` is the preloaded library: its frames are the runtime's, never the user's call site,
    even when it is stripped."""
    # perf names the mapped file (the symlink's target); the user may have given either.
    alloc_names = {os.path.basename(allocator), os.path.basename(os.path.realpath(allocator))} if allocator else set()

    def is_allocator(f) -> bool:
        return os.path.basename(f[1] or "") in alloc_names or any(k in _clean(f[0]) for k in ALLOCATOR_FRAMES)

    def is_runtime(f) -> bool:
        return bool(SYSTEM_DSOS.search(f[1] or "[unknown]")) or os.path.basename(f[1] or "") in alloc_names

    by_event: dict[str, list] = {}
    for comm, event, frames, *weight in samples:
        w = weight[0] if weight else 1
        name = event.split("/")[0].split(":")[-1].replace("sys_enter_", "")
        users, paths, comms, n, through = by_event.get(name, (Counter(), Counter(), Counter(), 0, 0))
        frames = [f for f in frames if "[kernel" not in f[1]]
        user = next((f for f in frames if not is_runtime(f)), None)
        inner = frames[:frames.index(user)] if user else frames
        path = [_clean(f[0]) for f in reversed(inner) if f[0] != "[unknown]"]
        users[_site(user) if user else LOST] += w
        if path:
            paths[" -> ".join(dict.fromkeys(path))] += w
        comms[comm] += w
        by_event[name] = (users, paths, comms, n + w, through + w * any(is_allocator(f) for f in inner))
    out = {}
    for name, (users, paths, comms, n, through) in by_event.items():
        out[name] = {"samples": n, "through_allocator": through / n,
                     "user_sites": [[site, k / n] for site, k in users.most_common(TOP)],
                     "internal_paths": [[p, k / n] for p, k in paths.most_common(TOP)],
                     "commands": [[c, k / n] for c, k in comms.most_common(TOP)]}
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
                "own code (stripped, or unwinding failed): no call site to name"]
    out = [f"{label} come from (of {e['samples']} sampled stacks): " +
           "; ".join(f"{site} {share:.0%}" for site, share in e["user_sites"] if share >= 0.005)]
    if e["internal_paths"]:
        out.append(f"{label} inside the runtime/allocator: " +
                   "; ".join(f"{p} {share:.0%}" for p, share in e["internal_paths"][:2] if share >= 0.005))
    if len(e.get("commands") or []) > 1:
        out.append(f"{label} by command: " + ", ".join(f"{c} {share:.0%}" for c, share in e["commands"]))
    return out
