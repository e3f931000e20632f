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
                               peak_live_bytes, at_exit its live_bytes
  malloc_object                the object that served malloc (glibc's libc, or the preloaded allocator)
  processes_detail             per process, by pid: pid, live_bytes, peak_live_bytes, allocs, frees,
                               at_exit (as above)
  timeline                     the main process's live bytes over time: [[ms, bytes], ...]
  sites                        the program's call sites by sampled bytes: allocated, live at the
                               peak, live at exit (estimates from samples, each standing for
                               sample_bytes on average)
"""
from __future__ import annotations

import glob
import json
import os
import re

from memsleuth.records import symbols

# A site's frames: the first frame outside these objects is the program's call site.
RUNTIME = re.compile(r"(^|/)(libc\.so|libc-|ld-linux|libpthread|libstdc\+\+|libgcc_s|libm\.so|libmsheap\.so|"
                     r"libmimalloc|libjemalloc|libtcmalloc|libpython|python3)")
TOP_SITES = 12
STACKS = 300                    # whole stacks kept (the most bytes allocated), for flame graphs and pprof
STACK_WEIGHTS = ("alloc_bytes", "peak_bytes", "live_bytes")



def _name_frames(docs: list[dict], notes: list[str]) -> dict[tuple[int, int], tuple[symbols.Frame, ...]]:
    """(document index, address) -> its frames; the runtime's objects by their file only."""
    return symbols.resolve(docs, lambda d: [a for s in d.get("sites") or [] for a in s.get("frames") or []],
                           skip=RUNTIME.search, notes=notes)


def _top_stacks(stacks: dict[tuple, list[float]]) -> list[tuple]:
    """The STACKS stacks with the most bytes by each weight (allocated, at the peak, at exit), the
    most allocated first."""
    keep: dict[tuple, None] = {}
    for i in range(len(STACK_WEIGHTS)):
        for st in sorted((st for st, w in stacks.items() if w[i] > 0), key=lambda st: -stacks[st][i])[:STACKS]:
            keep[st] = None
    return sorted(keep, key=lambda st: -stacks[st][0])


NO_SITE = "no frame outside the runtime (an interpreter, or a stack that could not be unwound)"


def summarise(docs: list[dict]) -> dict | None:
    """One summary of a run's per-process documents (None when there are none)."""
    docs = [d for d in docs if isinstance(d, dict) and isinstance(d.get("live_bytes"), (int, float))]
    if not docs:
        return None
    main = max(docs, key=lambda d: d.get("peak_live_bytes") or 0)
    notes: list[str] = []
    names = _name_frames(docs, notes)
    sites: dict[str, dict] = {}
    stacks: dict[tuple, list[float]] = {}
    for d_i, d in enumerate(docs):
        for s in d.get("sites") or []:
            frames = [f for a in s.get("frames") or [] for f in names.get((d_i, a), ())]
            own, maker = symbols.program_site(frames, RUNTIME.search)
            key = symbols.site_with_maker(own, maker) if own else NO_SITE
            agg = sites.setdefault(key, {"site": key, "alloc_bytes": 0.0, "alloc_count": 0.0, "peak_bytes": 0.0,
                                         "live_bytes": 0.0, "samples": 0})
            for k in ("alloc_bytes", "alloc_count", "peak_bytes", "live_bytes", "samples"):
                agg[k] += float(s.get(k) or 0)
            st = stacks.setdefault(symbols.stack_entry(frames, RUNTIME.search), [0.0, 0.0, 0.0])
            for i, k in enumerate(STACK_WEIGHTS):
                st[i] += float(s.get(k) or 0)
    keep = set()
    for k in ("alloc_bytes", "peak_bytes", "live_bytes"):
        keep |= {s["site"] for s in sorted(sites.values(), key=lambda s: -s[k])[:TOP_SITES] if s[k] > 0}
    hist = [0] * max(len(d.get("histogram") or []) for d in docs)
    for d in docs:
        for i, v in enumerate(d.get("histogram") or []):
            hist[i] += int(v)
    return {
        "processes": len(docs),
        "sample_bytes": main.get("sample_bytes"),
        "live_bytes": sum(int(d.get("live_bytes") or 0) for d in docs),
        "peak_live_bytes": sum(int(d.get("peak_live_bytes") or 0) for d in docs),
        "allocs": sum(int(d.get("allocs") or 0) for d in docs),
        "frees": sum(int(d.get("frees") or 0) for d in docs),
        "requested_bytes": sum(int(d.get("requested_bytes") or 0) for d in docs),
        "duration_s": (main.get("duration_us") or 0) / 1e6,
        "dropped_samples": sum(int(d.get("dropped_samples") or 0) for d in docs),
        "histogram": hist,
        "malloc_object": main.get("malloc_object"),
        "processes_detail": [{"pid": d.get("pid"), **{k: int(d.get(k) or 0) for k in (
            "live_bytes", "peak_live_bytes", "allocs", "frees")}, "at_exit": d.get("at_exit") or {}}
            for d in sorted(docs, key=lambda d: d.get("pid") or 0)],
        # the main process's own peak beside the snapshot that stands for it (near_peak)
        "at_peak": {**(main.get("at_peak") or {}), "peak_live_bytes": int(main.get("peak_live_bytes") or 0)},
        # the main process's live bytes beside its own memory (live_bytes above is every process's)
        "at_exit": {**(main.get("at_exit") or {}), "live_bytes": int(main.get("live_bytes") or 0)},
        "timeline": [[t / 1000.0, v] for t, v in (main.get("timeline") or [])],
        "sites": sorted((s for s in sites.values() if s["site"] in keep), key=lambda s: -s["alloc_bytes"]),
        # whole stacks, outermost first, with their bytes allocated, live at the peak and at exit
        "stacks": [[[list(f) for f in st], *stacks[st]] for st in _top_stacks(stacks)],
        **({"site_notes": notes} if notes else {}),
    }


def read(folder: str) -> dict | None:
    docs = []
    for path in sorted(glob.glob(os.path.join(folder, "heap-*.json"))):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                docs.append(json.load(f))
        except (OSError, ValueError):
            continue
    return summarise(docs)
