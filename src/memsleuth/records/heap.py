"""Heap accounting (native/heap/ms_heap.c, preloaded in explaining runs): its per-process
documents read into one summary per run, with the sampled allocation stacks named once per object
(addr2line) and reduced to the program's own call sites.

The summary (stored as the run's "heap", docs/json-schema.md):
  live_bytes, peak_live_bytes  usable bytes live at exit and at the peak (summed over processes:
                               the peak is an upper bound when several processes peak apart)
  allocs, frees, requested_bytes, duration_s, histogram (requests by power of two)
  at_peak, at_exit             the main process's (the largest live peak's) live bytes, resident
                               and anonymous memory and, under glibc, its arenas (arenas: how many
                               besides the main one, -1 when malloc is not glibc's; arena_rss_kb,
                               arena_kb: their resident KiB in all and each; main_arena_kb: the brk
                               heap's) at its live peak (read when live had grown 10% past the last
                               reading and was within 10% of the peak then; a brief peak can pass
                               unread: near_peak) and at exit; at_peak carries the process's own
                               peak_live_bytes, at_exit its live_bytes; own_anon_kb, own_ranges,
                               own_complete: the resident KiB of the anonymous mappings it made
                               outside the allocator (ms_own.h), how many, all of them kept
  malloc_object                the object that served malloc (glibc's libc, or the preloaded allocator)
  processes_detail             per process, by pid: pid, live_bytes, peak_live_bytes, allocs, frees,
                               at_exit (as above)
  timeline                     the main process's live bytes over time: [[ms, bytes], ...]
  sites                        the program's call sites by sampled bytes: allocated, live at the
                               peak (estimates from samples, each standing for sample_bytes on
                               average), live at exit (each process's exact live bytes split by
                               its samples still live: _exit_scale)
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from memsleuth.records import documents, symbols
from memsleuth.records.documents import number as _number, with_defaults

# A site's frames: the first frame outside these objects is the program's call site.
RUNTIME = re.compile(r"(^|/)(libc\.so|libc-|ld-linux|libpthread|libstdc\+\+|libgcc_s|libm\.so|libmsheap\.so|"
                     r"libmimalloc|libjemalloc|libtcmalloc|libpython|python3)")
# Of those, the objects whose frames keep their file's name only (not looked up): memsleuth's own
# interposer (its frames are left out of every stack) and the interpreters, whose symbol tables are
# large and whose program frames come from their perf maps. The C library, the loader and C++'s
# runtime are named: a heap stack starts at __libc_start_call_main, not at "libc.so.6" (issue 45).
UNNAMED = re.compile(r"(^|/)(libmsheap\.so|libpython|python3)")
TOP_SITES = 12
STACKS = 300                    # whole stacks kept (the most bytes allocated), for flame graphs and pprof
STACK_WEIGHTS = ("alloc_bytes", "peak_bytes", "live_bytes")


# A process's document as libmsheap writes it: each field the summary reads, and its value where
# the document lacks it (a process that ended before writing it, an older version).
PROCESS_DEFAULTS = {"pid": None, "live_bytes": 0, "peak_live_bytes": 0, "allocs": 0, "frees": 0, "requested_bytes": 0,
                    "duration_us": 0, "dropped_samples": 0, "sample_bytes": None, "histogram": [], "malloc_object": None,
                    "at_peak": {}, "at_exit": {}, "timeline": [], "sites": [], "maps": []}
SITE_DEFAULTS = {"frames": [], "alloc_bytes": 0, "alloc_count": 0, "peak_bytes": 0, "live_bytes": 0, "samples": 0}
# The summary (the stored document): where an older one lacks a field.
SUMMARY_DEFAULTS = {"processes": 1, "sample_bytes": None, "allocs": 0, "frees": 0, "requested_bytes": None,
                    "duration_s": 0.0, "histogram": [], "malloc_object": None, "processes_detail": [], "at_peak": None,
                    "at_exit": None, "timeline": [], "sites": [], "stacks": []}


def _read(v) -> float | None:
    """A reading the accounting writes as -1 where it could not read it: None then."""
    v = _number(v)
    return v if v is not None and v >= 0 else None


def _present(d: dict, *keys) -> dict:
    """The keys the document has (a document of an older version lacks some)."""
    return {k: d[k] for k in keys if k in d}


@dataclass(frozen=True)
class Snapshot:
    """One reading of a process's memory by the accounting (at its live peak, or at exit), in the
    document's units; None where it was not read. `arenas` is None when malloc is not glibc's
    (the accounting reads arenas only there)."""
    live_bytes: float | None = None
    peak_live_bytes: float | None = None
    rss_kb: float | None = None
    anon_kb: float | None = None
    arenas: int | None = None
    arena_rss_kb: float | None = None
    main_arena_kb: float | None = None
    arena_kb: tuple[float, ...] = ()
    # Resident KiB of the private anonymous mappings made outside the allocator (the program's own
    # mmap buffers, a runtime's heap, an interpreter's arenas: native/heap/ms_own.h), how many, and
    # whether every one was kept (False: a lower bound); None where the accounting did not read them.
    own_anon_kb: float | None = None
    own_ranges: int | None = None
    own_complete: bool = True

    @property
    def malloc_anon_kb(self) -> float | None:
        """The anonymous resident memory that can be malloc's: all of it but the mappings made outside
        the allocator."""
        if self.anon_kb is None:
            return None
        return max(0.0, self.anon_kb - (self.own_anon_kb or 0.0))

    @classmethod
    def from_dict(cls, d) -> "Snapshot":
        d = with_defaults(d if isinstance(d, dict) else {}, {"arenas": None, "arena_kb": None})
        arenas = d["arenas"] if isinstance(d["arenas"], int) and d["arenas"] >= 0 else None
        glibc = _present(d, "arena_rss_kb", "main_arena_kb") if arenas is not None else {}
        return cls(**{k: _number(v) for k, v in _present(d, "live_bytes", "peak_live_bytes").items()},
                   **{k: _read(v) for k, v in _present(d, "rss_kb", "anon_kb", "own_anon_kb").items()},
                   own_ranges=int(d["own_ranges"]) if isinstance(d.get("own_ranges"), int) else None,
                   own_complete=d.get("own_complete") is not False,
                   **{k: (_read(v) if k == "main_arena_kb" else _number(v)) for k, v in glibc.items()},
                   arenas=arenas,
                   arena_kb=tuple(float(x) for x in d["arena_kb"] or () if _number(x) is not None)
                   if arenas is not None and isinstance(d["arena_kb"], list) else ())


@dataclass(frozen=True)
class HeapSite:
    """A program's call site by the bytes of its sampled allocation stacks (estimates)."""
    site: str
    alloc_bytes: float = 0.0
    alloc_count: float = 0.0
    peak_bytes: float = 0.0
    live_bytes: float = 0.0
    samples: float = 0.0

    def bytes_by(self, measure: str) -> float:
        """By one of STACK_WEIGHTS: allocated, live at the peak, live at exit."""
        return {"alloc_bytes": self.alloc_bytes, "peak_bytes": self.peak_bytes, "live_bytes": self.live_bytes}[measure]


@dataclass(frozen=True)
class ProcessHeap:
    pid: int | None
    live_bytes: float
    peak_live_bytes: float
    allocs: int
    frees: int
    at_exit: Snapshot


@dataclass(frozen=True)
class Heap:
    """A run's heap accounting (summarise's document, docs/json-schema.md), typed. `at_peak` and
    `at_exit` are the main process's (the largest live peak's); the totals are every process's."""
    processes: int = 1
    sample_bytes: float | None = None
    live_bytes: float = 0.0
    peak_live_bytes: float = 0.0
    allocs: int = 0
    frees: int = 0
    requested_bytes: float | None = None
    duration_s: float = 0.0
    histogram: tuple[int, ...] = ()
    malloc_object: str | None = None
    processes_detail: tuple[ProcessHeap, ...] = ()
    at_peak: Snapshot = Snapshot()
    at_exit: Snapshot = Snapshot()
    timeline: tuple[tuple[float, float], ...] = ()    # the main process's live bytes: (ms, bytes)
    sites: tuple[HeapSite, ...] = ()
    stacks: tuple = ()                                 # [[frame, ...], allocated, at the peak, at exit]
    doc: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_dict(cls, d) -> "Heap | None":
        """The stored document, typed; None for anything that is not one."""
        if not isinstance(d, dict) or _number(d.get("live_bytes")) is None:
            return None
        f = with_defaults(d, {**SUMMARY_DEFAULTS, "peak_live_bytes": d["live_bytes"]})
        sites = tuple(HeapSite(str(x["site"]), **{k: float(x[k]) for k in ("alloc_bytes", "alloc_count", "peak_bytes",
                                                                            "live_bytes", "samples")
                                                   if k in x and _number(x[k]) is not None})
                      for x in f["sites"] if isinstance(x, dict) and "site" in x)
        procs = tuple(ProcessHeap(p["pid"], float(p["live_bytes"]), float(p["peak_live_bytes"]), int(p["allocs"]),
                                  int(p["frees"]), Snapshot.from_dict(p["at_exit"]))
                      for p in (with_defaults(x, PROCESS_DEFAULTS) for x in f["processes_detail"] if isinstance(x, dict)))
        return cls(processes=int(f["processes"]), live_bytes=float(f["live_bytes"]),
                   peak_live_bytes=float(f["peak_live_bytes"]), allocs=int(f["allocs"]), frees=int(f["frees"]),
                   duration_s=float(f["duration_s"]), sample_bytes=_number(f["sample_bytes"]),
                   requested_bytes=_number(f["requested_bytes"]),
                   histogram=tuple(int(v) for v in f["histogram"] if _number(v) is not None),
                   malloc_object=f["malloc_object"], processes_detail=procs,
                   at_peak=Snapshot.from_dict(f["at_peak"]), at_exit=Snapshot.from_dict(f["at_exit"]),
                   timeline=tuple((float(t), float(v)) for t, v in f["timeline"]),
                   sites=sites, stacks=tuple(f["stacks"]), doc=d)

    def to_dict(self) -> dict:
        return self.doc

    @property
    def main_peak_bytes(self) -> float:
        """The main process's live peak: the live heap its snapshots' memory belongs with (the
        total for a document stored before the snapshot carried it)."""
        return self.at_peak.peak_live_bytes if self.at_peak.peak_live_bytes is not None else self.peak_live_bytes

    @property
    def main_live_bytes(self) -> float:
        """The main process's live bytes at exit (the total for an older document)."""
        return self.at_exit.live_bytes if self.at_exit.live_bytes is not None else self.live_bytes


def _name_frames(docs: list[dict], notes: list[str]) -> dict[tuple[int, int], tuple[symbols.Frame, ...]]:
    """(document index, address) -> its frames; memsleuth's and the interpreters' objects by their file only."""
    return symbols.resolve(docs, lambda d: [a for s in d["sites"] for a in with_defaults(s, SITE_DEFAULTS)["frames"]],
                           skip=UNNAMED.search, notes=notes)


def _top_stacks(stacks: dict[tuple, list[float]]) -> list[tuple]:
    """The STACKS stacks with the most bytes by each weight (allocated, at the peak, at exit), the
    most allocated first."""
    keep: dict[tuple, None] = {}
    for i in range(len(STACK_WEIGHTS)):
        for st in sorted((st for st, w in stacks.items() if w[i] > 0), key=lambda st: -stacks[st][i])[:STACKS]:
            keep[st] = None
    return sorted(keep, key=lambda st: -stacks[st][0])


def _exit_scale(doc: dict, doc_sites: list[dict]) -> float:
    """What turns a process's sampled live bytes at exit into shares of its exact ones: each sampled
    allocation stands for sample_bytes on average, so a site that leaked sixty 16 KiB blocks (0.94
    MiB) read 0, 1 or 2 MiB as none, one or two of them happened to be sampled. The total live at
    exit is counted exactly (every block), so the samples still live only split it among the sites
    (a ratio estimate): a single leaking site then gets the exact bytes. Where the samples missed a
    site altogether, its bytes go to the others: the split is still an estimate (~)."""
    sampled = sum(float(s["live_bytes"]) for s in doc_sites)
    return float(doc["live_bytes"]) / sampled if sampled > 0 else 1.0


NO_SITE = "no frame outside the runtime (an interpreter, or a stack that could not be unwound)"


def summarise(docs: list[dict]) -> dict | None:
    """One summary of a run's per-process documents (None when there are none)."""
    docs = [with_defaults(d, PROCESS_DEFAULTS) for d in docs
            if isinstance(d, dict) and _number(d.get("live_bytes")) is not None]
    if not docs:
        return None
    main = max(docs, key=lambda d: d["peak_live_bytes"])
    notes: list[str] = []
    names = _name_frames(docs, notes)
    sites: dict[str, dict] = {}
    stacks: dict[tuple, list[float]] = {}
    for d_i, d in enumerate(docs):
        doc_sites = [with_defaults(x, SITE_DEFAULTS) for x in d["sites"]]
        exit_scale = _exit_scale(d, doc_sites)
        for s in doc_sites:
            s = {**s, "live_bytes": float(s["live_bytes"]) * exit_scale}
            frames = [f for a in s["frames"] for f in names.get((d_i, a), ())]
            own, maker = symbols.program_site(frames, RUNTIME.search)
            key = symbols.site_with_maker(own, maker) if own else NO_SITE
            agg = sites.setdefault(key, {"site": key, "alloc_bytes": 0.0, "alloc_count": 0.0, "peak_bytes": 0.0,
                                         "live_bytes": 0.0, "samples": 0})
            for k in ("alloc_bytes", "alloc_count", "peak_bytes", "live_bytes", "samples"):
                agg[k] += float(s[k])
            st = stacks.setdefault(symbols.stack_entry(frames, RUNTIME.search), [0.0, 0.0, 0.0])
            for i, k in enumerate(STACK_WEIGHTS):
                st[i] += float(s[k])
    keep = set()
    for k in ("alloc_bytes", "peak_bytes", "live_bytes"):
        keep |= {s["site"] for s in sorted(sites.values(), key=lambda s: -s[k])[:TOP_SITES] if s[k] > 0}
    hist = [0] * max(len(d["histogram"]) for d in docs)
    for d in docs:
        for i, v in enumerate(d["histogram"]):
            hist[i] += int(v)
    return {
        "processes": len(docs),
        "sample_bytes": main["sample_bytes"],
        **{k: sum(int(d[k]) for d in docs) for k in ("live_bytes", "peak_live_bytes", "allocs", "frees",
                                                      "requested_bytes")},
        "duration_s": main["duration_us"] / 1e6,
        "dropped_samples": sum(int(d["dropped_samples"]) for d in docs),
        "histogram": hist,
        "malloc_object": main["malloc_object"],
        "processes_detail": [{"pid": d["pid"], **{k: int(d[k]) for k in (
            "live_bytes", "peak_live_bytes", "allocs", "frees")}, "at_exit": d["at_exit"]}
            for d in sorted(docs, key=lambda d: d["pid"] or 0)],
        # the main process's own peak beside the snapshot that stands for it (near_peak)
        "at_peak": {**main["at_peak"], "peak_live_bytes": int(main["peak_live_bytes"])},
        # the main process's live bytes beside its own memory (live_bytes above is every process's)
        "at_exit": {**main["at_exit"], "live_bytes": int(main["live_bytes"])},
        "timeline": [[t / 1000.0, v] for t, v in main["timeline"]],
        "sites": sorted((s for s in sites.values() if s["site"] in keep), key=lambda s: -s["alloc_bytes"]),
        # whole stacks, outermost first, with their bytes allocated, live at the peak and at exit
        "stacks": [[[list(f) for f in st], *stacks[st]] for st in _top_stacks(stacks)],
        **({"site_notes": notes} if notes else {}),
    }


def read(folder: str) -> dict | None:
    """The summary of the documents libmsheap's processes wrote in `folder` (heap.jsonl), by pid."""
    return summarise(sorted(documents.run_documents(folder, "heap"), key=lambda d: str(d.get("pid"))))
