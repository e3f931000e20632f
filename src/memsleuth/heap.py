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

from memsleuth import native, symbols

# A site's frames: the first frame outside these objects is the program's call site.
RUNTIME = re.compile(r"(^|/)(libc\.so|libc-|ld-linux|libpthread|libstdc\+\+|libgcc_s|libm\.so|libmsheap\.so|"
                     r"libmimalloc|libjemalloc|libtcmalloc|libpython|python3)")
TOP_SITES = 12
STACKS = 300                    # whole stacks kept (the most bytes allocated), for flame graphs and pprof
STACK_WEIGHTS = ("alloc_bytes", "peak_bytes", "live_bytes")


def library() -> str:
    return str(native.native_path("libmsheap.so"))


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


# ---- the numbers the reports show (computed here, worded in report/builders/check.py) ----------

# The accounting reads its peak snapshot once the live heap is within this factor of its peak
# (ms_heap.c PEAK_STEP); a snapshot also waits out the spacing after the last one, so a brief peak
# (a short-lived worker's) can pass unread and the snapshot is then of an earlier, lower moment.
PEAK_NEAR = 1.10


def near_peak(h: dict) -> tuple[bool, float | None, float | None]:
    """(whether the 'at the peak' snapshot was read within PEAK_NEAR of the main process's live
    peak, the live bytes it was read at, that peak). True when the document does not say."""
    snap = h.get("at_peak") or {}
    live, peak = snap.get("live_bytes"), snap.get("peak_live_bytes")
    if not isinstance(live, (int, float)) or not isinstance(peak, (int, float)) or peak <= 0:
        return True, live, peak
    return live * PEAK_NEAR >= peak, float(live), float(peak)


def main_live(h: dict) -> tuple[float, float]:
    """The main process's live peak and live bytes at exit: the live heap its snapshots' memory
    belongs with (the summary's own live_bytes and peak_live_bytes are every process's). The sums
    for a document stored before the snapshots carried them."""
    peak = (h.get("at_peak") or {}).get("peak_live_bytes", h.get("peak_live_bytes"))
    live = (h.get("at_exit") or {}).get("live_bytes", h.get("live_bytes"))
    return float(peak or 0), float(live or 0)


def _in_bytes(snap: dict, live) -> dict:
    """A snapshot (at the peak or at exit) in bytes; None where it was not read."""
    rss = snap.get("rss_kb")
    anon = snap.get("anon_kb")
    rss = rss * 1024.0 if isinstance(rss, (int, float)) and rss >= 0 else None
    anon = anon * 1024.0 if isinstance(anon, (int, float)) and anon >= 0 else None
    live = float(live) if isinstance(live, (int, float)) else None
    arena = snap.get("arena_rss_kb")
    glibc = isinstance(snap.get("arenas"), int) and snap["arenas"] >= 0    # -1: the allocator is not glibc
    main = snap.get("main_arena_kb")
    return {"rss": rss, "anon": anon, "live": live,
            # Live blocks need not be resident (a block allocated and never touched is not): a live heap
            # larger than the anonymous memory leaves "beyond" unknown, and says how much live is not resident.
            "beyond": anon - live if anon is not None and live is not None and anon >= live else None,
            "unresident": live - anon if anon is not None and live is not None and live > anon else None,
            "file": rss - anon if rss is not None and anon is not None else None,
            "main_arena": main * 1024.0 if glibc and isinstance(main, (int, float)) and main >= 0 else None,
            "arena": arena * 1024.0 if glibc and isinstance(arena, (int, float)) else None,
            "arenas": snap.get("arenas") if glibc else None}


def _at_peak_and_exit(h: dict) -> tuple[dict, dict]:
    return (_in_bytes(h.get("at_peak") or {}, (h.get("at_peak") or {}).get("live_bytes")),
            _in_bytes(h.get("at_exit") or {}, (h.get("at_exit") or {}).get("live_bytes", h.get("live_bytes"))))


def composition(h: dict) -> list[tuple[str, float | None, float | None]]:
    """What resident memory is made of, in bytes, at the live peak and at exit: rows of
    (what, at the peak, at exit); None where it was not read."""
    p, e = _at_peak_and_exit(h)
    rows = [(what, p[k], e[k]) for what, k in (
        ("resident (RSS)", "rss"), ("anonymous", "anon"), ("live heap (usable bytes of live blocks)", "live"),
        ("anonymous beyond the live heap (allocator overhead, freed memory kept, other mappings)", "beyond"),
        ("live heap not resident (live blocks never touched: the live heap exceeds the anonymous memory)",
         "unresident"),
        ("file-backed (RSS - anonymous)", "file"), ("glibc main arena (brk heap), resident", "main_arena"),
        ("glibc other arenas' heaps, resident", "arena"), ("glibc other arenas, count", "arenas"))]
    # The not-resident row only where it happened; "beyond" is unknown there, never negative.
    return [r for r in rows if not r[0].startswith("live heap not resident") or r[1] is not None or r[2] is not None]


def footprint(sample) -> dict | None:
    """An explaining run's heap as compare's Heap table shows it (a cell's JSON "heap"), in bytes of
    the main process: its live peak, the anonymous resident memory read for it and the live heap it
    was read at (near_peak: within 10% of the peak, or a brief peak missed), both at exit; the most
    anonymous memory beyond the live heap at any tick of the run (composition_series: one process
    only), with the live heap and the time then (fragmentation and freed memory kept show there:
    after frees, not at the peak); glibc's other arenas at the peak. None where not read; None
    without accounting."""
    h = sample.heap
    if not h:
        return None
    p, e = _at_peak_and_exit(h)
    near, _, peak = near_peak(h)
    series = composition_series(sample)
    most = max(range(len(series["beyond"])), key=series["beyond"].__getitem__) if series and series["beyond"] else None
    return {"live_at_peak_bytes": peak if peak is not None else p["live"], "anon_at_peak_bytes": p["anon"],
            "anon_read_at_live_bytes": p["live"], "anon_read_near_peak": near,
            "most_beyond_live_bytes": series["beyond"][most] if most is not None else None,
            "live_then_bytes": series["live"][most] if most is not None else None,
            "most_beyond_live_at_s": series["seconds"][most] if most is not None else None,
            "live_at_exit_bytes": e["live"], "anon_at_exit_bytes": e["anon"], "other_arenas_at_peak": p["arenas"]}


def size_profile(h: dict, top: int = 3) -> list[tuple[int, int, float]]:
    """The request sizes that take most calls: (from bytes, to bytes, share of calls), largest first.
    Bucket b holds the requests of ceil(log2(size)) == b: (2^(b-1), 2^b]."""
    hist = h.get("histogram") or []
    total = sum(hist)
    if not total:
        return []
    rows = [((1 << (b - 1)) + 1 if b else 0, 1 << b, n / total) for b, n in enumerate(hist) if n]
    return sorted(rows, key=lambda r: -r[2])[:top]


def top_sites(h: dict, key: str, n: int = 3) -> list[dict]:
    """The n allocation sites with the most bytes by `key` (alloc_bytes, peak_bytes, live_bytes)."""
    return sorted((x for x in h.get("sites") or [] if x.get(key, 0) > 0), key=lambda x: -x[key])[:n]


def alloc_rate(h: dict) -> float | None:
    """Allocations per second over the accounted run."""
    dur = h.get("duration_s") or 0
    return h.get("allocs", 0) / dur if dur else None


def composition_series(sample) -> dict[str, list[float]] | None:
    """Resident memory over the explaining run, in bytes per tick: the live heap (the accounting's
    last reading at or before the tick, capped by the anonymous memory: live blocks not yet touched
    are not resident), the anonymous memory beyond it, and file-backed memory. None without both
    a timeline and the accounting's, and when the accounting saw several processes: ms-run's
    timeline is the whole tree's memory, the live heap's timeline one process's, and the rest of
    the tree would read as memory beyond that one live heap."""
    t = sample.timeline
    tl = (sample.heap or {}).get("timeline") or []
    if t is None or not tl or (sample.heap or {}).get("processes", 1) > 1:
        return None
    ms, rss, anon = t.times_ms, t.column("rss_kb"), t.column("anon_kb")
    if not ms or not rss or not anon:
        return None
    live, k = [], 0
    for now in ms:
        while k + 1 < len(tl) and tl[k + 1][0] <= now:
            k += 1
        live.append(float(tl[k][1]) if tl[k][0] <= now else 0.0)
    shown = [min(lv, a * 1024.0) for lv, a in zip(live, anon)]
    return {"seconds": [x / 1000 for x in ms], "live": shown,
            "beyond": [a * 1024.0 - lv for a, lv in zip(anon, shown)],
            "file": [max(0.0, (r - a) * 1024.0) for r, a in zip(rss, anon)]}
