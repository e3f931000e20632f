"""The memory rules (heap_overhead, heap_retained, heap_leak) and the heap summary's numbers, on
synthetic heap accounting documents: each just past its threshold and just short of it."""
from __future__ import annotations

from types import SimpleNamespace

from memsleuth.analysis import memory
from memsleuth.records import heap
from memsleuth.records.evidence import Sample, Timeline
from memsleuth.analysis.findings import heap_leak, heap_overhead, heap_retained
from memsleuth.analysis.view import CellView

MIB = 1 << 20
H = heap.Heap.from_dict     # a stored document as the later tiers read it


def view(h: dict, minflt: int = 100) -> CellView:
    doc = {"status": "ok", "wall_ns": 10 ** 9, "user_ns": 9 * 10 ** 8, "sys_ns": 10 ** 8, "minflt": minflt,
           "maxrss_kb": 100_000, "counters": {}, "syscalls": {}, "unsupported": {}, "probe": [], "heap": h}
    return CellView("c", "glibc", [Sample.from_msrun(doc)])


def doc(live=50 * MIB, peak=50 * MIB, anon_peak_kb=60_000, anon_exit_kb=60_000, live_at_peak=None, arenas=0,
        arena_kb=0, timeline=None, sites=None) -> dict:
    return {"live_bytes": live, "peak_live_bytes": peak, "allocs": 1000, "frees": 10, "sample_bytes": MIB,
            "histogram": [0, 0, 0, 0, 10, 90], "duration_s": 1.0,
            "at_peak": {"live_bytes": live_at_peak if live_at_peak is not None else peak, "anon_kb": anon_peak_kb,
                        "rss_kb": anon_peak_kb + 2000, "arenas": arenas, "arena_rss_kb": arena_kb},
            "at_exit": {"anon_kb": anon_exit_kb, "rss_kb": anon_exit_kb + 2000, "arenas": arenas,
                        "arena_rss_kb": arena_kb},
            "timeline": timeline or [], "sites": sites or []}


def test_overhead_fires_past_its_share_and_names_the_arenas():
    # 100 MiB anonymous, 50 MiB live: 50 MiB (50%) beyond the live heap, 4 arenas hold most of it.
    f = heap_overhead.check(view(doc(anon_exit_kb=100 * 1024, arenas=4, arena_kb=45 * 1024)))
    assert f and f[0].id == "heap-overhead" and f[0].numbers["when"] == "at exit"
    assert "4 glibc thread arenas" in f[0].title and "arena_max" in f[0].advice
    # 70 MiB anonymous: 20 MiB beyond is 29%, under the 35% share.
    assert heap_overhead.check(view(doc(anon_exit_kb=70 * 1024))) == []


def test_memory_the_program_mapped_outside_the_allocator_is_not_overhead():
    # 1 GiB anonymous at exit against 1 MiB live: the program mapped and filled 1 GiB itself (mmap,
    # kept by the accounting as its own mapping), which is no allocator's overhead.
    own = doc(live=MIB, peak=MIB, anon_peak_kb=1025 * 1024, anon_exit_kb=1025 * 1024)
    own["at_exit"].update(own_anon_kb=1024 * 1024, own_ranges=1, own_complete=True)
    assert heap_overhead.check(view(own)) == []
    # 100 MiB more than its own mapping and the live heap: that much is overhead, said with the mapping left out.
    more = doc(live=MIB, peak=MIB, anon_peak_kb=1125 * 1024, anon_exit_kb=1125 * 1024)
    more["at_exit"].update(own_anon_kb=1024 * 1024, own_ranges=1, own_complete=True)
    f = heap_overhead.check(view(more))
    assert f and f[0].numbers["unexplained_bytes"] == 100 * MIB
    assert any("1024.0 MiB of the anonymous resident memory at exit is in 1 mapping made with mmap outside the "
               "allocator" in e for e in f[0].evidence), f[0].evidence
    assert "mmap pools" not in f[0].advice
    # a document written before the accounting kept them: as before
    assert heap_overhead.check(view(doc(live=MIB, peak=MIB, anon_exit_kb=1025 * 1024)))


def test_overhead_after_the_frees_reads_the_peak_and_leaves_the_rest_to_retained():
    # Freed 80% by exit: the exit's extra is heap_retained's; at the peak 60 MiB anon held 50 MiB live.
    h = doc(live=10 * MIB, peak=50 * MIB, anon_peak_kb=60 * 1024, anon_exit_kb=58 * 1024)
    assert heap_overhead.check(view(h)) == []
    r = heap_retained.check(view(h))
    assert r and r[0].numbers["kept_bytes"] == 48 * MIB


def test_retained_needs_the_heap_to_stay_fallen_for_a_while():
    # 50 MiB live at its peak, 10 MiB at exit, 58 MiB anonymous kept: the rule's counts hold in both.
    base = dict(live=10 * MIB, peak=50 * MIB, anon_peak_kb=60 * 1024, anon_exit_kb=58 * 1024)
    # A service after its burst: the heap fell at 1 s of a 4 s run and stayed down.
    burst = doc(**base, timeline=[[0, 1 * MIB], [500, 50 * MIB], [1000, 10 * MIB], [4000, 10 * MIB]])
    burst["duration_s"] = 4.0
    f = heap_retained.check(view(burst))
    assert f and any("stayed fallen" in e and "last 3.00 s of the 4.00 s run" in e for e in f[0].evidence), f
    # Rounds that grow back to the peak (an interpreter collecting per round), falling for good only
    # as the process ends: what was kept was reused, and nothing is held long after.
    rounds = [[r * 1000 + 900, 50 * MIB] for r in range(4)] + [[3950, 10 * MIB]]
    again = doc(**base, timeline=[[0, 1 * MIB], *[[t - 400, 5 * MIB] for t, _ in rounds[:4]], *rounds])
    again["timeline"].sort()
    again["duration_s"] = 4.0
    assert heap_retained.check(view(again)) == []


def _teardown(peak_mib: float, level_mib: float, exit_mib: float, run_s: float, fall_s: float) -> list:
    """A timeline that climbs to its peak, holds `level_mib` (no points: the accounting adds one only when
    the live bytes move by 1/32) and falls to `exit_mib` in the last `fall_s` seconds of the run."""
    climb = [[t * 10.0, peak_mib * MIB * t / 10] for t in range(1, 11)]
    steps = 12
    start = (run_s - fall_s) * 1000
    fall = [[start + k * fall_s * 1000 / steps, (level_mib - (level_mib - exit_mib) * k / steps) * MIB]
            for k in range(steps + 1)]
    return climb + fall


def test_the_frees_of_a_teardown_are_not_memory_kept_or_overhead():
    """Perl's global destruction: a 145 MiB hash held, then 56 MiB of it freed in the last 0.65 s of a
    5.4 s run. Against the 88.8 MiB live at exit, the 153 MiB anonymous read 64 MiB 'not in live malloc
    blocks'; before those frees the heap held 140 MiB of it."""
    h = doc(live=int(88.8 * MIB), peak=145 * MIB, anon_peak_kb=150 * 1024, anon_exit_kb=153 * 1024,
            timeline=_teardown(145, 140, 88.8, 5.4, 0.65))
    h["duration_s"] = 5.4
    hp = heap.Heap.from_dict(h)
    assert abs(memory.live_before_teardown(hp) - 140 * MIB) < MIB
    assert heap_overhead.check(view(h)) == [] and heap_retained.check(view(h)) == []
    # Where the memory beyond the heap is there before the teardown too, the finding says against what
    h["at_exit"]["anon_kb"] = 260 * 1024
    f = heap_overhead.check(view(h))
    assert f and "before the frees of its teardown (88.8 MiB at exit)" in f[0].evidence[0], f
    assert f[0].numbers["unexplained_bytes"] == 260 * MIB - h["timeline"][-13][1]
    # Lua's lua_close frees everything: what the allocator kept is read against the level before it
    lua = doc(live=0, peak=145 * MIB, anon_peak_kb=165 * 1024, anon_exit_kb=152 * 1024,
              timeline=[[100, 145 * MIB], [1500, 87 * MIB], [4300, 80 * MIB], [4380, 40 * MIB], [4458, 0]])
    lua["duration_s"] = 4.46
    r = heap_retained.check(view(lua))
    assert r and r[0].numbers["kept_bytes"] == 152 * MIB - 80 * MIB and "80.0 MiB" in r[0].title, r


def test_a_fall_long_before_the_end_is_no_teardown():
    # The heap fell to 10 MiB at 1 s and the program worked on for 3 s: what it holds at exit is its level
    h = doc(live=10 * MIB, peak=50 * MIB, timeline=[[0, 1 * MIB], [500, 50 * MIB], [800, 30 * MIB],
                                                    [1000, 10 * MIB]])
    h["duration_s"] = 4.0
    assert memory.live_before_teardown(heap.Heap.from_dict(h)) == 10 * MIB
    # A fall that lasts longer than a fifth of the run is read back only that far
    h["timeline"] = [[t * 100.0, (50 - t) * MIB] for t in range(41)]
    assert memory.live_before_teardown(heap.Heap.from_dict(h)) == (50 - 32) * MIB


def test_retained_needs_the_memory_to_stay():
    # The heap freed 80% and anonymous memory fell with it (to 40% of the peak's): given back.
    assert heap_retained.check(view(doc(live=10 * MIB, peak=50 * MIB, anon_peak_kb=60 * 1024,
                                        anon_exit_kb=24 * 1024))) == []


def test_leak_needs_growth_to_the_end_and_names_the_sites_of_the_live_bytes():
    grow = [[t * 100.0, (5 + t * 5) * MIB] for t in range(20)]
    sites = [{"site": "buffer (a.c:12)", "alloc_bytes": 900 * MIB, "live_bytes": 0, "peak_bytes": 1 * MIB,
              "samples": 900},
             {"site": "session (a.c:14)", "alloc_bytes": 100 * MIB, "live_bytes": 95 * MIB, "peak_bytes": 95 * MIB,
              "samples": 95}]
    f = heap_leak.check(view(doc(live=100 * MIB, peak=100 * MIB, timeline=grow, sites=sites)))
    assert f and f[0].numbers["sites"] == ["session (a.c:14)"] and "a.c:12" not in " ".join(f[0].evidence)
    flat = [[t * 100.0, 100 * MIB] for t in range(20)]
    assert heap_leak.check(view(doc(live=100 * MIB, peak=100 * MIB, timeline=flat))) == []
    # Grew, then most of it was freed: not a leak.
    assert heap_leak.check(view(doc(live=40 * MIB, peak=100 * MIB, timeline=grow))) == []


def test_a_heap_filled_by_the_first_job_and_held_is_not_growth_to_the_end():
    # An interpreter whose object pool the first of six jobs grows and the others reuse (tclsh
    # building and dropping a 1M-element list per job): readings are dense while the heap grows and
    # sparse after, so fifths of the readings made the first job look like the whole run.
    first_job = [[t * 18.0, (0.3 + t * 4.4) * MIB] for t in range(20)]
    held = [[400.0 + t * 80, (77 if t % 2 else 88) * MIB] for t in range(20)]
    assert heap_leak.check(view(doc(live=77 * MIB, peak=89 * MIB, timeline=first_job + held))) == []
    # The same heap still growing through the second half is.
    growing = first_job + [[400.0 + t * 80, (88 + t * 4) * MIB] for t in range(20)]
    (f,) = heap_leak.check(view(doc(live=164 * MIB, peak=164 * MIB, timeline=growing)))
    assert f.numbers["live_first_bytes"] < f.numbers["live_last_bytes"] / 2


def test_composition_and_size_profile():
    h = doc(live=50 * MIB, anon_exit_kb=80 * 1024)
    rows = {what.split(" (")[0]: (p, e) for what, p, e in memory.composition(H(h))}
    assert rows["anonymous beyond the live heap"][1] == 30 * MIB
    assert rows["file-backed"][1] == 2000 * 1024
    assert memory.size_profile(H(h))[0] == (17, 32, 0.9)     # bucket 5: 17..32 bytes, 90% of calls


def test_summaries_of_several_processes_add_up():
    docs = [{"live_bytes": 10, "peak_live_bytes": 20, "allocs": 3, "frees": 1, "requested_bytes": 30,
             "histogram": [1, 2], "sites": [], "maps": []},
            {"live_bytes": 5, "peak_live_bytes": 50, "allocs": 2, "frees": 2, "requested_bytes": 40,
             "histogram": [0, 1, 4], "sites": [], "maps": []}]
    s = heap.summarise(docs)
    assert (s["live_bytes"], s["peak_live_bytes"], s["allocs"], s["histogram"]) == (15, 70, 5, [1, 3, 4])
    assert heap.summarise([]) is None


def test_arena_rows_only_under_glibc():
    h = doc(anon_exit_kb=100 * 1024)
    h["at_exit"]["arenas"], h["at_peak"]["arenas"] = -1, -1      # another allocator's 64 MiB-aligned segments
    rows = {what: (p, e) for what, p, e in memory.composition(H(h))}
    assert rows["glibc other arenas, count"] == (None, None) and rows["glibc other arenas' heaps, resident"] == (None, None)
    assert rows["glibc main arena (brk heap), resident"] == (None, None)


def test_arenas_per_process_and_the_footprint():
    """summarise keeps each process's arenas (the thread-heap case reads them); footprint is compare's view."""
    from memsleuth.cases.thread_heap import arenas_by_process
    parent = doc(live=1000, peak=2000)
    parent["pid"] = 10
    parent["at_exit"].update({"arenas": 0, "main_arena_kb": 132, "arena_kb": []})
    child = doc(live=10 * MIB, peak=40 * MIB, anon_peak_kb=50 * 1024, live_at_peak=40 * MIB)
    child["pid"] = 11
    child["at_exit"].update({"arenas": 2, "main_arena_kb": 200, "arena_kb": [300, 400]})
    s = heap.summarise([child, parent])
    assert [p["pid"] for p in s["processes_detail"]] == [10, 11]
    assert arenas_by_process(H(s)) == [[132 * 1024], [200 * 1024, 300 * 1024, 400 * 1024]]
    # The main process's 10 ms ticks: live climbs to 40 MiB, then 30 MiB of it is freed while anonymous
    # memory stays: the most beyond live is after the frees, not at the peak.
    ms_timeline = Timeline(("t_ms", "rss_kb", "anon_kb"), ((0, 3000, 1000), (10, 53000, 50 * 1024),
                                                            (20, 53000, 50 * 1024), (30, 40000, 40 * 1024)))
    s["timeline"] = [[0.0, 0], [8.0, 40 * MIB], [15.0, 10 * MIB]]
    # Two processes: the timeline is the tree's memory, the live heap's one process's: no series.
    assert memory.footprint(SimpleNamespace(heap=H(s), timeline=ms_timeline)).most_beyond_live_bytes is None
    s = heap.summarise([child])
    s["timeline"] = [[0.0, 0], [8.0, 40 * MIB], [15.0, 10 * MIB]]
    f = memory.footprint(SimpleNamespace(heap=H(s), timeline=ms_timeline))
    assert f.live_at_peak_bytes == 40 * MIB and f.anon_at_peak_bytes == 50 * MIB * 1.0
    assert (f.most_beyond_live_bytes, f.live_then_bytes, f.most_beyond_live_at_s) == (40 * MIB, 10 * MIB, 0.02)
    assert f.live_at_exit_bytes == 10 * MIB and memory.footprint(SimpleNamespace(heap=None, timeline=None)) is None
    child["at_exit"]["arenas"] = -1                 # not glibc: no arena evidence at all
    assert arenas_by_process(H(heap.summarise([child, parent]))) is None


def test_a_peak_snapshot_that_missed_the_peak_names_the_moment_it_was_read():
    """A short-lived worker can reach its peak between two readings: the snapshot is then of a lower
    moment, and the evidence says which instead of calling it the peak."""
    h = doc(live=1 * MIB, peak=80 * MIB, anon_peak_kb=60 * 1024, anon_exit_kb=50 * 1024, live_at_peak=20 * MIB)
    h["at_peak"]["peak_live_bytes"] = 80 * MIB
    assert memory.near_peak(H(h)) == (False, 20 * MIB, 80 * MIB)
    (f,) = heap_retained.check(view(h))
    assert "when the live heap was 20.0 MiB (its peak: 80.0 MiB)" in " ".join(f.evidence)
    (f,) = heap_overhead.check(view(h))
    assert f.numbers["when"] == "when the live heap was 20.0 MiB (its peak: 80.0 MiB)"
    f = memory.footprint(SimpleNamespace(heap=H(h), timeline=None))    # the peak itself, and where memory was read
    assert (f.live_at_peak_bytes, f.anon_read_at_live_bytes, f.anon_read_near_peak) == (80 * MIB, 20 * MIB,
                                                                                                  False)
    h["at_peak"]["live_bytes"] = 73 * MIB                  # within 10% of the peak: it stands for the peak
    assert memory.near_peak(H(h))[0] and "at the live peak" in " ".join(heap_retained.check(view(h))[0].evidence)


def test_a_leak_that_holds_what_the_faults_brought_in_comes_first():
    """A program leaking ~94 MiB first-touches that memory: the faults' finding is the leak's symptom,
    so the leak heads the findings, and says why."""
    from memsleuth.analysis import findings
    from memsleuth.analysis.findings.base import Finding
    grow = [[t * 100.0, (5 + t * 5) * MIB] for t in range(20)]
    leaking = doc(live=94 * MIB, peak=94 * MIB, timeline=grow,
                  sites=[{"site": "keep (leak.c:9)", "alloc_bytes": 94 * MIB, "live_bytes": 94 * MIB,
                          "peak_bytes": 94 * MIB, "samples": 94}])
    v = view(leaking, minflt=94 * MIB // 4096)          # the leak's pages, faulted in once each
    (leak,) = heap_leak.check(v)
    faults = Finding(id="first-touch", title="First-touch faults: 40 ms = 30% of the CPU time", mechanism="m",
                     evidence=[], advice="touch the memory first", confidence="high", subject="c", cost_share=0.30,
                     cost_ns=4e7)
    ordered = findings.order([faults, leak], v)
    assert [f.id for f in ordered] == ["heap-leak", "first-touch"]
    assert "the faults are largely the leak's memory" in ordered[0].evidence[-1]
    # The same leak beside far more memory faulted in than it holds stays behind the costlier faults.
    assert [f.id for f in findings.order([faults, leak], view(leaking, minflt=1_000_000))] == ["first-touch",
                                                                                               "heap-leak"]


def test_a_wrapper_scripts_own_allocations_never_top_the_table():
    """A pyenv shim (a bash script) runs before python: bash's xmalloc is left out of the top sites,
    and said to be; a shell measured on its own keeps its sites."""
    from memsleuth.analysis import memory
    from memsleuth.records.heap import Heap, HeapSite
    sites = [HeapSite("xmalloc (bash, no line information)", alloc_bytes=9e6),
             HeapSite("build (job.py:3) via PyList_New (python3.12, no line information)", alloc_bytes=4e6)]
    import dataclasses
    h = Heap(sites=tuple(sites))
    top = memory.top_sites(h, "alloc_bytes")
    assert [s.site for s in top] == [sites[1].site]
    assert [s.site for s in memory.wrapper_sites(h)] == [sites[0].site]
    alone = dataclasses.replace(h, sites=(sites[0],))
    assert [s.site for s in memory.top_sites(alone, "alloc_bytes")] == [sites[0].site]


def _server(requests: int, kept: float, transient: float = 40 * MIB) -> list:
    """A server's timeline: each request allocates a transient buffer beside `kept` bytes it never frees."""
    tl = []
    for r in range(requests):
        tl += [[r * 30.0, (r + 1) * kept + transient], [r * 30.0 + 20, (r + 1) * kept]]
    return tl


def test_a_leak_beside_transient_peaks_is_read_from_the_heaps_low_points():
    # 60 requests, 16 KiB kept and a 40 MiB buffer freed per request: never 80% of the peak live at
    # exit, so only the low points between the peaks show the leak.
    tl = _server(60, 16 << 10)
    leak = [{"site": "session (srv.c:9)", "alloc_bytes": 2 * MIB, "live_bytes": 983_040, "peak_bytes": MIB,
             "samples": 2}]
    (f,) = heap_leak.check(view(doc(live=983_040, peak=41 * MIB, timeline=tl, sites=leak)))
    assert f.numbers["by"] == "floor" and f.numbers["sites"] == ["session (srv.c:9)"]
    assert "between peaks" in f.title and "960.0 KiB still live at exit" in f.title
    assert f.numbers["live_first_bytes"] < 300 << 10 and f.numbers["live_last_bytes"] > 750 << 10
    assert "whose heap the timeline follows" not in f.evidence[0]
    # Several processes: the timeline is the main one's, and the evidence says whose bytes it holds.
    several = {**doc(live=983_040, peak=41 * MIB, timeline=tl, sites=leak), "processes": 3}
    (f,) = heap_leak.check(view(several))
    assert "still live at exit in the process whose heap the timeline follows" in f.evidence[0], f.evidence[0]
    # The same leak where no sampled allocation was still live: found, no site named, and why.
    (f,) = heap_leak.check(view(doc(live=983_040, peak=41 * MIB, timeline=tl)))
    assert f.numbers["sites"] == [] and "MEMSLEUTH_HEAP_SAMPLE" in f.evidence[-1]
    # Under the 512 KiB floor growth: 60 x 8 KiB.
    assert heap_leak.check(view(doc(live=491_520, peak=41 * MIB, timeline=_server(60, 8 << 10)))) == []
    # Low points that rise, then fall back (a cache filled and emptied): not growth to the end.
    back = tl[:80] + [[t + 2400.0, v - 600_000] for t, v in tl[80:]]
    assert heap_leak.check(view(doc(live=383_040, peak=41 * MIB, timeline=back))) == []
    # A floor filled in the first half and then held (an interpreter's pool): no growth in the second half.
    filled = _server(30, 32 << 10)
    held = filled + [[t + 900.0, v + (960 << 10)] for t, v in _server(30, 0)]
    assert [round(v / 1024) for v in heap_leak.floors(held)][3:] == [960, 960]     # held since the middle
    assert heap_leak.check(view(doc(live=960 << 10, peak=41 * MIB, timeline=held))) == []
    # Freed before exit: the low point rose, but what it held is gone.
    assert heap_leak.check(view(doc(live=100 << 10, peak=41 * MIB, timeline=tl))) == []


def test_live_bytes_at_exit_are_the_exact_total_split_by_the_samples():
    # One process, exactly 983,040 bytes live; its samples read 2 MiB at one site, nothing elsewhere.
    d = {"pid": 1, "live_bytes": 983_040, "peak_live_bytes": 41 * MIB, "sample_bytes": MIB, "timeline": [],
         "sites": [{"frames": [], "alloc_bytes": 2 * MIB, "live_bytes": 2 * MIB, "samples": 2},
                   {"frames": [], "alloc_bytes": 40 * MIB, "live_bytes": 0, "samples": 40}]}
    s = heap.summarise([d])
    assert sum(x["live_bytes"] for x in s["sites"]) == 983_040
    assert sum(x["alloc_bytes"] for x in s["sites"]) == 42 * MIB        # allocated bytes stay the samples' estimate
    # Nothing sampled still live: the sites' live bytes stay 0.
    d["sites"][0]["live_bytes"] = 0
    assert all(x["live_bytes"] == 0 for x in heap.summarise([d])["sites"])


def test_resident_growth_steps_aside_for_the_live_heap_that_grows_to_the_end():
    # An awk script filling an associative array: RSS and the live heap grow together to the end.
    # rss-growth ("this run does not show which": kept data or a leak) would contradict heap-leak,
    # which shows it is live heap and where it was allocated.
    from memsleuth.analysis import findings
    from test_costs import timeline
    grow = [[t * 100.0, (5 + t * 5) * MIB] for t in range(20)]
    rows = [{"t_ms": t, "rss_kb": t * 50 + 2000} for t in range(0, 2000, 10)]
    d = {"status": "ok", "wall_ns": 2 * 10 ** 9, "user_ns": 19 * 10 ** 8, "sys_ns": 10 ** 8, "minflt": 100,
         "maxrss_kb": 102_000, "counters": {}, "syscalls": {}, "unsupported": {}, "probe": [],
         "timeline": timeline(rows), "heap": doc(live=100 * MIB, peak=100 * MIB, timeline=grow)}
    ids = [f.id for f in findings.for_cell(CellView("c", "glibc", [Sample.from_msrun(d)]))]
    assert "heap-leak" in ids and "rss-growth" not in ids, ids
    # A live heap that grows to 20 MiB beside 100 MiB of resident growth explains a fifth of it: both stay.
    d["heap"] = doc(live=20 * MIB, peak=20 * MIB, timeline=[[t * 100.0, (1 + t) * MIB] for t in range(20)])
    ids = [f.id for f in findings.for_cell(CellView("c", "glibc", [Sample.from_msrun(d)]))]
    assert "heap-leak" in ids and "rss-growth" in ids, ids
    d["heap"] = doc(live=100 * MIB, peak=100 * MIB, timeline=grow)
    del d["heap"]           # without the heap accounting, resident growth is all there is to say
    assert "rss-growth" in [f.id for f in findings.for_cell(CellView("c", "glibc", [Sample.from_msrun(d)]))]


def test_a_fifth_spent_inside_one_peak_does_not_hide_the_leak():
    """The fixture's first request touches its whole 24 MiB buffer; beside two busy loops it took
    longer than a fifth of the run, and that fifth's low point was the peak itself: a leak read as
    falling low points, none found (a loaded fresh-clone run)."""
    tl = [[0.0, 24 * MIB], [70.0, 24 * MIB + (32 << 10)]]          # the first request, 70 ms
    tl += [[70.0 + r * 6.0 + d, v] for r in range(1, 40)
           for d, v in ((0.0, (r + 1) * (32 << 10) + 24 * MIB), (1.0, (r + 1) * (32 << 10)))]
    low = heap_leak.floors(tl)
    assert low == sorted(low) and low[0] < 200 << 10 and low[-1] > 900 << 10, [round(v / 1024) for v in low]
    (f,) = heap_leak.check(view(doc(live=40 * (32 << 10), peak=25 * MIB, timeline=tl)))
    assert f.numbers["by"] == "floor" and "fell to from each fifth of the run on rose: 64.0 KiB" in f.evidence[0]
    assert "{" not in f.evidence[0] and "per second; 1.2 MiB still live at exit, counted exactly" in f.evidence[0], \
        f.evidence[0]


def test_a_heap_grown_level_is_not_left_behind_between_peaks():
    """A compiler keeps what it builds until it exits: cc1plus's live heap (stored from a real check of
    g++ -O2 -c) rose to 10.8 MiB with a top of 12.1 MiB. Its low points rise, but there are no transient
    peaks for them to lie between, and under MEMORY_FLOOR_BYTES the level rule does not speak: it read
    'Live heap left behind between peaks grows to the end' (high)."""
    import json
    from pathlib import Path
    stored = json.loads((Path(__file__).parent.parent / "data" / "heap-timeline-cc1plus.json").read_text())
    tl, live = stored["timeline"], stored["main_live_bytes"]
    low = heap_leak.floors(tl)
    assert low == sorted(low) and low[-1] > 10 * MIB, low          # the floors do rise
    assert live >= heap_leak.MIN_EXIT_SHARE * max(v for _, v in tl)
    assert heap_leak.check(view(doc(live=live, peak=max(v for _, v in tl), timeline=tl))) == []
    # One large temporary in a heap that otherwise grows level: a single peak, no series to read floors between.
    grow = [[t * 10.0, (1 + t / 20) * MIB] for t in range(200)]
    once = grow[:100] + [[1000.5, 40 * MIB], [1001.0, grow[100][1]]] + grow[100:]
    assert heap_leak.peaks(once, (40 * MIB - 11 * MIB) / 2) == 1
    assert heap_leak.check(view(doc(live=11 * MIB, peak=40 * MIB, timeline=once))) == []
    # The same growth beside a 30 MiB buffer every 50 ms (a server's requests): left behind between peaks.
    served = [p for t, v in grow for p in ([[t, v + 30 * MIB], [t + 1, v]] if int(t) % 50 == 0 else [[t, v]])]
    assert heap_leak.peaks(served, (31 * MIB - 11 * MIB) / 2) >= heap_leak.MIN_PEAKS
    (f,) = heap_leak.check(view(doc(live=11 * MIB, peak=41 * MIB, timeline=served)))
    assert f.numbers["by"] == "floor"
