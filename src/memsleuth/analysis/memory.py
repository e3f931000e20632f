"""The memory view's numbers, from the heap accounting's record (records/heap.py): what resident
memory is made of at the live peak and at exit, compare's Heap table, the request sizes, the top
sites, the composition over time. Worded by report/builders/check.py and compare.py."""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from memsleuth.records.heap import Heap, HeapSite, Snapshot


# The accounting reads its peak snapshot once the live heap is within this factor of its peak
# (ms_heap.c PEAK_STEP); a snapshot also waits out the spacing after the last one, so a brief peak
# (a short-lived worker's) can pass unread and the snapshot is then of an earlier, lower moment.
PEAK_NEAR = 1.10


def near_peak(h: Heap) -> tuple[bool, float | None, float | None]:
    """(whether the 'at the peak' snapshot was read within PEAK_NEAR of the main process's live
    peak, the live bytes it was read at, that peak). True when the document does not say."""
    live, peak = h.at_peak.live_bytes, h.at_peak.peak_live_bytes
    if live is None or peak is None or peak <= 0:
        return True, live, peak
    return live * PEAK_NEAR >= peak, live, peak


def main_live(h: Heap) -> tuple[float, float]:
    """The main process's live peak and live bytes at exit: the live heap its snapshots' memory
    belongs with (the summary's own live_bytes and peak_live_bytes are every process's)."""
    return float(h.main_peak_bytes or 0), float(h.main_live_bytes or 0)


# A program's teardown: the frees it makes as it ends (Perl's global destruction, Lua's lua_close,
# C++'s static destructors, CPython's finalization), after which the exit snapshot is read. The
# timeline's last points fall without a rise, the last of them within TEARDOWN_GAP_S (or
# TEARDOWN_GAP_SHARE of the run) of its end; the fall is read back to TEARDOWN_SHARE of the run. A
# Perl program that builds a 145 MiB hash read 88.8 MiB live at exit after 0.65 s of global
# destruction (12% of its run) from 136 MiB: compared with the anonymous memory at exit, the 47 MiB
# its teardown freed read as resident memory not in live malloc blocks.
TEARDOWN_SHARE = 0.2
TEARDOWN_GAP_S = 0.25
TEARDOWN_GAP_SHARE = 0.05


def live_before_teardown(h: Heap) -> float:
    """The main process's live bytes before the frees of its teardown (above), or at exit where its
    timeline shows none; never less than the live bytes at exit. What the anonymous memory at exit is
    held against: memory freed as the process ends is given back by the exit itself, and memory the
    allocator kept while the program ran is the part it paid for."""
    exit_live = float(h.main_live_bytes or 0)
    t, run_ms = h.timeline, h.duration_s * 1000.0
    if len(t) < 2 or run_ms <= 0 or run_ms - t[-1][0] > max(TEARDOWN_GAP_S * 1000.0, TEARDOWN_GAP_SHARE * run_ms):
        return exit_live
    # back from the last point while each earlier one is higher, within TEARDOWN_SHARE of the run (the
    # timeline adds a point only when the live bytes move by 1/32: a level held for a while leaves a gap
    # in time, not a point, so the fall is bounded by time, not by the first rise)
    i = len(t) - 1
    while i > 0 and t[i - 1][1] > t[i][1] and t[-1][0] - t[i - 1][0] <= TEARDOWN_SHARE * run_ms:
        i -= 1
    return max(exit_live, t[i][1])


def _kib(v: float | None) -> float | None:
    return v * 1024.0 if v is not None else None


def _in_bytes(snap: Snapshot, live: float | None) -> dict:
    """A snapshot (at the peak or at exit) in bytes; None where it was not read."""
    rss, anon = _kib(snap.rss_kb), _kib(snap.anon_kb)
    glibc = snap.arenas is not None    # the allocator is glibc's: its arenas were read
    return {"rss": rss, "anon": anon, "live": live,
            # Live blocks need not be resident (a block allocated and never touched is not): a live heap
            # larger than the anonymous memory leaves "beyond" unknown, and says how much live is not resident.
            "beyond": anon - live if anon is not None and live is not None and anon >= live else None,
            "unresident": live - anon if anon is not None and live is not None and live > anon else None,
            "file": rss - anon if rss is not None and anon is not None else None,
            "main_arena": _kib(snap.main_arena_kb) if glibc else None,
            "arena": _kib(snap.arena_rss_kb) if glibc else None,
            "arenas": snap.arenas}


def _at_peak_and_exit(h: Heap) -> tuple[dict, dict]:
    return _in_bytes(h.at_peak, h.at_peak.live_bytes), _in_bytes(h.at_exit, h.main_live_bytes)


def composition(h: Heap) -> list[tuple[str, float | None, float | None]]:
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


@dataclass(frozen=True)
class Footprint:
    """An explaining run's heap as compare's Heap table shows it (a cell's JSON "heap"), in bytes of
    the main process (footprint)."""
    live_at_peak_bytes: float
    anon_at_peak_bytes: float | None
    anon_read_at_live_bytes: float          # the live heap the anonymous memory at the peak was read at
    anon_read_near_peak: bool               # within 10% of the peak (or a brief peak missed)
    most_beyond_live_bytes: float | None    # the most anonymous memory beyond the live heap at any tick
    live_then_bytes: float | None
    most_beyond_live_at_s: float | None
    live_at_exit_bytes: float
    anon_at_exit_bytes: float | None
    other_arenas_at_peak: int | None        # glibc's arenas other than main's

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def footprint(sample) -> Footprint | None:
    """An explaining run's Footprint: its live peak, the anonymous resident memory read for it and
    the live heap it was read at (near_peak: within 10% of the peak, or a brief peak missed), both at
    exit; the most anonymous memory beyond the live heap at any tick of the run (composition_series:
    one process only), with the live heap and the time then (fragmentation and freed memory kept show
    there: after frees, not at the peak); glibc's other arenas at the peak. A figure None where not
    read; None without accounting."""
    h = sample.heap
    if not h:
        return None
    p, e = _at_peak_and_exit(h)
    near, _, peak = near_peak(h)
    series = composition_series(sample)
    most = max(range(len(series["beyond"])), key=series["beyond"].__getitem__) if series and series["beyond"] else None
    return Footprint(live_at_peak_bytes=peak if peak is not None else p["live"], anon_at_peak_bytes=p["anon"],
                     anon_read_at_live_bytes=p["live"], anon_read_near_peak=near,
                     most_beyond_live_bytes=series["beyond"][most] if most is not None else None,
                     live_then_bytes=series["live"][most] if most is not None else None,
                     most_beyond_live_at_s=series["seconds"][most] if most is not None else None,
                     live_at_exit_bytes=e["live"], anon_at_exit_bytes=e["anon"], other_arenas_at_peak=p["arenas"])


def size_profile(h: Heap, top: int = 3) -> list[tuple[int, int, float]]:
    """The request sizes that take most calls: (from bytes, to bytes, share of calls), largest first.
    Bucket b holds the requests of ceil(log2(size)) == b: (2^(b-1), 2^b]."""
    hist = h.histogram
    total = sum(hist)
    if not total:
        return []
    rows = [((1 << (b - 1)) + 1 if b else 0, 1 << b, n / total) for b, n in enumerate(hist) if n]
    return sorted(rows, key=lambda r: -r[2])[:top]


# A shell's own code: a wrapper script (a pyenv shim, a launcher) that runs before the program.
_SHELL_SITE = re.compile(r"\((bash|sh|dash|zsh|ksh|mksh|busybox)[,)]")


def wrapper_sites(h: Heap) -> list[HeapSite]:
    """The sites in a shell's own code, where other sites are the program's: a wrapper script's
    allocations, not the measured program's. Empty when the shell is all there is."""
    shell = [x for x in h.sites if _SHELL_SITE.search(x.site)]
    return shell if len(shell) < len(h.sites) else []


def top_sites(h: Heap, key: str, n: int = 3) -> list[HeapSite]:
    """The n allocation sites with the most bytes by `key` (alloc_bytes, peak_bytes, live_bytes), a
    wrapper script's own (wrapper_sites) left out: the program is the one reported."""
    skip = {id(x) for x in wrapper_sites(h)}
    return sorted((x for x in h.sites if x.bytes_by(key) > 0 and id(x) not in skip),
                  key=lambda x: -x.bytes_by(key))[:n]


def alloc_rate(h: Heap) -> float | None:
    """Allocations per second over the accounted run."""
    return h.allocs / h.duration_s if h.duration_s else None


def composition_series(sample) -> dict[str, list[float]] | None:
    """Resident memory over the explaining run, in bytes per tick: the live heap (the accounting's
    last reading at or before the tick, capped by the anonymous memory: live blocks not yet touched
    are not resident), the anonymous memory beyond it, and file-backed memory. None without both
    a timeline and the accounting's, and when the accounting saw several processes: ms-run's
    timeline is the whole tree's memory, the live heap's timeline one process's, and the rest of
    the tree would read as memory beyond that one live heap."""
    t, h = sample.timeline, sample.heap
    tl = h.timeline if h is not None else ()
    if t is None or not tl or h.processes > 1:
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
