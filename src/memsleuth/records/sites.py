"""Call sites as records: the explaining run's sampled stacks (the in-program sampler's or the
kernel's documents, the lines of `sites.jsonl`, or perf script's text) read once, their frames named
(symbols.py), and reduced per event to the user's call sites, the frames that made the calls, the
allocator's internal paths and the whole stacks that flame graphs and pprof read. The runs that
take them are measure/where.py's.

Each stack is read two ways: the user's call site (the first frame outside the C library, the C++
runtime, the dynamic loader and the allocator) and the allocator's internal path (its frames from
the entry point down to the system call: `free -> _int_free -> systrim -> sbrk`).
"""
from __future__ import annotations

import functools
import os
import re
from collections import Counter
from dataclasses import dataclass, field

from memsleuth.records import calls, documents, symbols
from memsleuth.records.model import Counts, Readings

TOP = 3                    # call sites kept per event and kind
STACKS = 200               # distinct stacks kept per event (the most sampled), for flame graphs and pprof
STACK_FRAMES = 48          # innermost frames kept of each
# Objects whose frames are not the user's code.
SYSTEM_DSOS = re.compile(r"(^|/)(libc\.so|libc-|ld-linux|ld-2|libpthread|libstdc\+\+|libgcc_s|libm\.so|"
                         r"libms(sites|heap)\.so|\[kernel|\[vdso|\[unknown\])")
# Where installed programs and libraries live (a package's, not the user's own build).
INSTALLED = re.compile(r"^(/usr/(bin|sbin|lib|lib64|libexec|local/lib)/|/lib(64)?/|/opt/|/nix/store/|/snap/|/gnu/store/)")
# A stack goes "through the allocator" when a frame is the preloaded allocator's own object, or a
# malloc-family entry point or glibc malloc internal (libc's malloc is in libc.so with everything else).
ALLOCATOR_FRAMES = ("malloc", "free", "realloc", "calloc", "_int_", "sysmalloc", "systrim", "operator new",
                    "operator delete", "mi_", "je_", "tc_", "tcmalloc", "scalable_", "arena")

# An allocator compiled into the program (Rust's mimalloc or tikv-jemallocator crates, a C++ service
# linking jemalloc statically): its functions, where they made the calls from the program's own
# object, by their prefixes. A Rust program on the mimalloc crate made 64 madvise calls from
# _mi_prim_decommit in its own binary, read "the program itself makes these calls ... tuning or
# replacing the allocator will not remove them", where mimalloc's own settings reach them.
BUILT_IN_ALLOCATORS = (("mimalloc", re.compile(r"^_?mi_")), ("jemalloc", re.compile(r"^(_rjem_)?je_|^_rjem_")),
                       ("tcmalloc", re.compile(r"^tcmalloc::|^tc_")), ("tbbmalloc", re.compile(r"^rml::|^scalable_")))


def built_in_allocator(function: str) -> str | None:
    """The allocator whose function this is, by its name (BUILT_IN_ALLOCATORS), or None."""
    return next((name for name, pattern in BUILT_IN_ALLOCATORS if pattern.match(function)), None)


LOST = "no frame of the program's own code (a runtime's own thread, the loader, or a stack that could not be unwound)"
# Below this share of stacks that reach the program's own code, the sites decide nothing.
MIN_UNWOUND = 0.5


# Stacks the sampler left out because the program blocked its signal when the call was made are
# said where they are at least this share of the sampled ones (a few in thousands change no share).
LATE_NOTED = 0.02

def _shares(rows) -> tuple[tuple[str, float], ...]:
    return tuple((str(r[0]), float(r[1])) for r in rows or () if isinstance(r, (list, tuple)) and len(r) == 2)


@dataclass(frozen=True)
class EventSites:
    """One event's call sites (summarise): each list is (text, share of the sampled stacks), the most
    sampled first; `period` is how many events one sample stands for."""
    samples: int = 0
    period: int = 1
    through_allocator: float | None = None      # None: stored before the share was recorded
    user_sites: tuple[tuple[str, float], ...] = ()
    makers: tuple[tuple[str, float], ...] = ()
    internal_paths: tuple[tuple[str, float], ...] | None = None
    commands: tuple[tuple[str, float], ...] = ()
    stacks: tuple = ()                           # [[frame, ...], samples], outermost frame first
    # The objects the makers' code is in, '(libjvm.so)', every one (not the TOP): whose code made
    # the calls when no few sites hold most of them (runtimes.runtime_of reads them alike).
    maker_objects: tuple[tuple[str, float], ...] = ()
    # Of those, the ones installed on the system (INSTALLED: a package's program or library, not
    # libc, the loader or the allocator): code the user did not build, such as an interpreter.
    installed_objects: tuple[tuple[str, float], ...] = ()
    # The allocators compiled into the program whose functions made the calls ('mimalloc (rmi)'):
    # BUILT_IN_ALLOCATORS, read from the makers in the program's own objects.
    built_in: tuple[tuple[str, float], ...] = ()

    @classmethod
    def from_dict(cls, d: dict) -> "EventSites":
        d = {k: v for k, v in d.items() if v is not None}
        return cls(samples=int(d["samples"]) if "samples" in d else 0, period=int(d["period"]) if "period" in d else 1,
                   through_allocator=float(d["through_allocator"]) if "through_allocator" in d else None,
                   user_sites=_shares(d["user_sites"]) if "user_sites" in d else (),
                   makers=_shares(d["makers"]) if "makers" in d else (),
                   internal_paths=_shares(d["internal_paths"]) if "internal_paths" in d else None,
                   commands=_shares(d["commands"]) if "commands" in d else (),
                   stacks=tuple(d["stacks"]) if "stacks" in d else (),
                   maker_objects=_shares(d["maker_objects"]) if "maker_objects" in d else (),
                   installed_objects=_shares(d["installed_objects"]) if "installed_objects" in d else (),
                   built_in=_shares(d["built_in"]) if "built_in" in d else ())

    @property
    def unwound_share(self) -> float:
        """The share of the sampled stacks that reached a frame of the program's own code."""
        return 1.0 - sum(share for site, share in self.user_sites if site == LOST)


@dataclass(frozen=True)
class CallSites:
    """A cell's call sites as stored (read_sampled, where.record): per event, or why there are none
    (`unavailable`: the sampler or perf could not take them; `skipped`: nothing called for them)."""
    events: Readings = field(default_factory=Readings)    # name -> EventSites; None: not sampled
    notes: tuple[str, ...] = ()
    sampler: str | None = None                   # in-program, kernel, perf record; None: perf record (older)
    unavailable: str | None = None
    skipped: str | None = None
    doc: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_dict(cls, d) -> "CallSites | None":
        if not isinstance(d, dict):
            return None
        d = {k: v for k, v in d.items() if v is not None}
        events = documents.of_type(d, "events", dict, {})
        return cls(events=Readings({str(k): EventSites.from_dict(v) for k, v in events.items() if isinstance(v, dict)}),
                   notes=tuple(str(n) for n in d["notes"]) if "notes" in d else (),
                   sampler=d["sampler"] if "sampler" in d else None,
                   unavailable=str(d["unavailable"]) if "unavailable" in d else None,
                   skipped=str(d["skipped"]) if "skipped" in d else None, doc=d)

    def to_dict(self) -> dict:
        return self.doc


def at_rate(sites: dict[str, dict], counts: dict[str, float]) -> None:
    """Events sampled at a rate, not a period (attach): each event's period is then its count over
    the same window divided by its samples, so a stack's samples x period estimate its events."""
    counts = Counts(counts)
    for name, found in sites.items():
        if found["samples"]:
            found["period"] = max(1, round(float(counts[name] or 0) / found["samples"]))


def read_sampled(folder: str, allocator: str | None, counts: dict[str, float] | None = None) -> dict:
    """The sampler's per-process documents as call sites per event (the shape `record` returns), or
    {"unavailable": why} when it took no sample to speak of (then perf record is the way).
    `counts`: the events counted over the same window, when the samples were taken at a rate
    (attach): each event's period is then its count over its samples."""
    docs = documents.stack_documents(folder, "sites")
    if not docs:
        if counts is not None:       # a window on running processes: they need not end, nor load anything
            return {"unavailable": "no stack was sampled in the window (the processes made none of the sampled "
                                   "calls or faults then, or the kernel's sampler could not open)"}
        return {"unavailable": "the program left no sampled stacks (it ended without exit(), or the sampler did not "
                               "load)"}
    events = {e["name"]: e for d in docs for e in d["events"]}
    if not any(e["opened"] for e in events.values()):
        why = "; ".join(f"{name}: {e['why']}" for name, e in events.items())
        return {"unavailable": f"the sampler could not open its events ({why})"}
    notes: list[str] = []
    named = symbols.resolve(docs, documents.stack_addresses, notes=notes)
    samples = []
    for d_i, d in enumerate(docs):
        names = [e["name"] for e in d["events"]]
        for st in d["stacks"]:
            fields = documents.stack_fields(st)
            if fields is None or not 0 <= fields[0] < len(names):
                continue
            ev, n, addresses, _, ret = fields
            samples.append((str(d["comm"] or "?"), names[ev], calls.chain(named, d_i, addresses, ret), n))
    sites = summarise(samples, allocator=allocator)
    for name, found in sites.items():
        found["period"] = int(events[name]["period"] or 1)
    if counts is not None:
        at_rate(sites, counts)
    notes += [f"{name}: not sampled ({e['why']})" for name, e in events.items() if not e["opened"]]
    notes += language_notes(docs, samples)
    late = sum(int(d["async"]) for d in docs)
    if late and late >= LATE_NOTED * (late + sum(n for *_, n in samples)):
        notes.append(f"{late} sampled stack{'s' if late != 1 else ''} left out: taken while the program blocked the "
                     "signal the sampler unwinds in (SIGTRAP), so the stack was no longer the one that made the call")
    outside = sorted({str(d["comm"] or "?") for d in docs if d["sampled_by"] == "kernel"})
    if outside:
        notes.append(f"sampled by the kernel, unwound by frame pointers (the in-program sampler could not load in "
                     f"them: a static executable, or a cleared environment): {', '.join(outside)}")
    own = any(d["sampled_by"] != "kernel" for d in docs)
    return {"events": sites, "notes": notes, "sampler": "in-program" if own else "kernel"}


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
            if dso.startswith("/") and not _PERF_MAP.search(dso):
                wanted.setdefault(dso, set()).add(symbols.file_address(dso, ip) - (k > 0))
    chains, why = symbols.symbolize(wanted) if wanted else ({}, [])
    notes.extend(why)
    out = []
    for comm, event, frames in samples:
        named: list[symbols.Frame] = []
        for k, (ip, sym, dso) in enumerate(frames):
            fn = None if sym in ("[unknown]", "") else _clean(sym)
            if _PERF_MAP.search(dso):   # a runtime's compiled code, named by its perf map
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


_INTERNAL_PREFIX = re.compile(r"^(?:__GI___?|__libc_)+")
_OFFSET = re.compile(r"\+0x[0-9a-f]+$")
_PERF_MAP = re.compile(r"/perf-\d+\.map$")


@functools.lru_cache(maxsize=1 << 16)
def _clean(sym: str) -> str:
    """A function's name without glibc's internal prefixes (__GI_, __libc_) and perf's +0x offset:
    pure, and asked for every frame of every sample, so remembered."""
    return _OFFSET.sub("", _INTERNAL_PREFIX.sub("", sym, count=1))


def language_notes(docs: list[dict], samples) -> list[str]:
    """What the sites cannot say in the program's language, and why: an interpreter older than the
    one whose frames can be named (CPython before 3.12 has no perf trampolines)."""
    if any(f.language for _, _, frames, *_ in samples for f in frames):
        return []
    for d in docs:
        for m in d["maps"]:
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

    @functools.lru_cache(maxsize=None)
    def _is_allocator(path: str, function: str) -> bool:
        return os.path.basename(path) in alloc_names or any(k in _clean(function) for k in ALLOCATOR_FRAMES)

    def is_allocator(f) -> bool:
        return _is_allocator(f.path or "", f.function or "")

    @functools.lru_cache(maxsize=None)      # asked for every frame of every stack (13,528 times for a gcc check)
    def is_runtime(path: str) -> bool:
        return bool(SYSTEM_DSOS.search(path or "[unknown]")) or os.path.basename(path or "") in alloc_names

    by_event: dict[str, list] = {}
    stacks: dict[str, Counter] = {}
    maker_objects: dict[str, Counter] = {}
    installed: dict[str, Counter] = {}
    built_in: dict[str, Counter] = {}
    for comm, event, frames, *weight in samples:
        w = weight[0] if weight else 1
        name = event.split("/")[0].split(":")[-1].replace("sys_enter_", "")
        users, makers, paths, comms, n, through = by_event.get(name, (Counter(), Counter(), Counter(), Counter(), 0, 0))
        objects = maker_objects.setdefault(name, Counter())
        frames = [f for f in frames if "[kernel" not in (f.path or "")]
        own, maker = symbols.program_site(frames, is_runtime)
        stacks.setdefault(name, Counter())[symbols.stack_entry(frames[:STACK_FRAMES], is_runtime)] += w
        inner = frames[:frames.index(maker)] if maker is not None else frames
        path = [_clean(f.function) for f in reversed(inner) if f.function]
        users[symbols.site_with_maker(own, maker) if own else LOST] += w
        makers[maker.text() if maker else own.text() if own else LOST] += w
        by = maker or own
        objects[f"({by.object})" if by is not None else LOST] += w
        if by is not None and INSTALLED.match(by.path or "") and not is_runtime(by.path) and not is_allocator(by):
            installed.setdefault(name, Counter())[f"({by.object})"] += w
        kind = built_in_allocator(_clean(by.function)) if by is not None and by.function and not is_runtime(by.path) \
            else None
        if kind is not None:
            built_in.setdefault(name, Counter())[f"{kind} ({by.object})"] += w
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
                     "maker_objects": [[o, k / n] for o, k in maker_objects[name].most_common()],
                     "installed_objects": [[o, k / n] for o, k in installed.get(name, Counter()).most_common()],
                     "built_in": [[o, k / n] for o, k in built_in.get(name, Counter()).most_common()],
                     "stacks": [[[list(f) for f in st], k] for st, k in stacks[name].most_common(STACKS)]}
    return out


def lines_for(where: CallSites | None, event: str) -> list[str]:
    """Report lines for one event's call sites."""
    if not where:
        return []
    if where.unavailable is not None:
        return [f"call sites not recorded: {where.unavailable}"]
    e = where.events[event]
    if not e:
        return []
    label = "page faults" if event == "page-faults" else f"{event} calls"
    if e.unwound_share < MIN_UNWOUND:
        return [f"{label}: {1 - e.unwound_share:.0%} of {e.samples} sampled stacks did not reach the program's "
                "own code (a runtime's own threads, stripped code, or unwinding that stopped): no call site to name"]
    out = [f"{label} come from (of {e.samples} sampled stacks): " +
           "; ".join(f"{site} {share:.0%}" for site, share in e.user_sites if share >= 0.005)]
    # the paths that round to a share: a line of none would name nothing (a program whose faults are its
    # own writes, and one stack in 400 through realloc's copy)
    inside = [f"{p} {share:.0%}" for p, share in (e.internal_paths or ())[:2] if share >= 0.005]
    if inside:
        out.append(f"{label} inside the runtime/allocator: " + "; ".join(inside))
    if len(e.commands) > 1:
        out.append(f"{label} by command: " + ", ".join(f"{c} {share:.0%}" for c, share in e.commands))
    return out
