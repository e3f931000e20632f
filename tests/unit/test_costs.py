"""Cost-first findings on stored whole-process evidence (issue 20): the kernel-time split, the
materiality threshold, the words from the calls' arguments, phases from the timeline, who makes the
calls from the counts' spread, the one line for a clean run, and a check that no finding says
what its own evidence contradicts. No process, no native build: documents of ms-run's shape."""
from __future__ import annotations

import pytest

from memsleuth.analysis import summary as analysis, findings
from memsleuth.records.evidence import Sample
from memsleuth.analysis import cost
from memsleuth.analysis.findings import heap_trim, madvise_storm, mmap_churn, mremap_churn, zero_page
from memsleuth.analysis.view import CellView
from memsleuth.units import PAGE_BYTES

MS = 1_000_000
UNITS = cost.UnitCosts(fault_ns=1000.0, release_page_ns=200.0,
                       syscall_ns={"mmap": 2000.0, "munmap": 2000.0, "brk": 2000.0, "madvise": 500.0,
                                   "mremap": 2000.0, "futex": 250.0, "mprotect": 1500.0})
COLUMNS = ["t_ms", "rss_kb", "anon_kb", "procs", "heap_kb", "page-faults-minor", "page-faults-major",
           "context-switches", "mmap", "munmap", "madvise", "brk", "mprotect", "mremap", "futex"]


def timeline(rows: list[dict]) -> dict:
    return {"columns": COLUMNS, "interval_ms": 10,
            "rows": [[int(r.get(c, 0)) for c in COLUMNS] for r in rows]}


def process(wall_ms=1000, user_ms=500, sys_ms=500, minflt=0, maxrss_kb=10_000, syscalls=None, args=None,
            rows=None) -> Sample:
    doc = {"status": "ok", "wall_ns": wall_ms * MS, "user_ns": user_ms * MS, "sys_ns": sys_ms * MS, "minflt": minflt,
           "maxrss_kb": maxrss_kb, "counters": {"page-faults-minor": minflt, "page-faults-major": 0},
           "syscalls": {"mmap": 0, "munmap": 0, "madvise": 0, "brk": 0, "mremap": 0, "futex": 0, **(syscalls or {})},
           "unsupported": {}, "probe": [], "syscall_args": args or {}}
    if rows:
        doc["timeline"] = timeline(rows)
    return Sample.from_msrun(doc)


def view(*samples: Sample, allocator="glibc", units=UNITS) -> CellView:
    return CellView("cell", allocator, list(samples), units=units)


def consistent(f) -> None:
    """What any finding must satisfy: its headline cost is its numbers', within the CPU time; its
    words follow from its arguments; who makes the calls and the advice agree."""
    if f.cost_share is not None and f.id not in ("rss-growth", "rss-blowup", "kernel-gap"):
        assert 0 <= f.cost_share <= 1.0, f
        assert cost.pct(f.cost_share) in f.title, f.title
    text = (f.title + " " + f.mechanism).lower()
    if "purg" in text:
        assert f.numbers.get("family") == "purge", f
    if f.id == "madvise-calls" and f.numbers.get("family"):
        assert "storm" not in text and "purg" not in text
    if f.who == "program" and f.id != "heap-leak":
        assert f.advice == analysis.program_advice(f.calls), f.advice
    if f.id == "heap-leak":   # a leak's change is to free what its sites allocate, not another rule's words
        assert f.advice.startswith("free what the named sites allocate"), f.advice
    assert f.confidence in ("low", "medium", "high")


# ---- the split --------------------------------------------------------------------------------

def test_the_split_never_claims_more_than_the_kernel_time():
    v = view(process(sys_ms=100, user_ms=900, minflt=1_000_000))   # 1 s of faults at 1 us against 100 ms
    split = v.kernel_split(v.process)
    assert split.cost("page-faults") <= 100 * MS + cost.TICK_SLACK_NS and split.scale < 0.2
    small = view(process(sys_ms=100, minflt=10_000))                  # 10 ms of faults: not scaled
    s2 = small.kernel_split(small.process)
    assert s2.scale == 1.0 and s2.cost("page-faults") == pytest.approx(10 * MS)
    assert s2.other_ns == pytest.approx(90 * MS)


def test_released_pages_count_with_the_calls_that_released_them():
    args = {"munmap": {"calls": 100, "bytes": 100 * (1 << 20)}}
    v = view(process(syscalls={"munmap": 100, "mmap": 100}, args=args))
    split = v.kernel_split(v.process)
    pages = 100 * (1 << 20) / PAGE_BYTES
    assert split.cost("munmap") == pytest.approx(100 * 2000 + pages * 200)


def test_unit_costs_from_a_store_are_validated():
    assert cost.UnitCosts.from_dict({"fault_ns": "x"}) is None
    assert cost.UnitCosts.from_dict({"fault_ns": -1, "release_page_ns": 1}) is None
    assert cost.UnitCosts.from_dict({"fault_ns": 900, "release_page_ns": 150, "syscall_ns": {"brk": 1500}}).fault_ns == 900


def test_memsleuths_own_counting_of_the_calls_is_said_where_it_is_material():
    from dataclasses import replace
    from memsleuth.analysis import quality
    counted = replace(UNITS, count_ns=270.0)
    # 11.4 million futex calls in 10.8 s of CPU time: ~3.1 s of it was the counting's
    heavy = view(process(wall_ms=5_400, user_ms=5_400, sys_ms=5_400, syscalls={"futex": 11_400_000}))
    w = quality.counting_cost("glibc", heavy.process, counted)
    assert w is not None and w.code == "counting"
    assert "3,078 ms" in w.text and "28% of the CPU time" in w.text and "futex 11,400,000" in w.text
    assert "270 ns" in w.text
    light = view(process(syscalls={"futex": 100_000, "mmap": 2_000}))          # 28 ms of 1 s: under 5%
    assert quality.counting_cost("glibc", light.process, counted) is None
    assert quality.counting_cost("glibc", heavy.process, UNITS) is None        # not measured: nothing said
    assert cost.UnitCosts.from_dict({"fault_ns": 900, "release_page_ns": 150, "count_ns": 270}).count_ns == 270
    assert cost.UnitCosts.from_dict({"fault_ns": 900, "release_page_ns": 150, "count_ns": "x"}).count_ns is None


def test_materiality_is_one_threshold_for_every_time_finding():
    # 40 madvise(DONTNEED) calls of 4 KiB: microseconds, whatever the rate.
    args = {"madvise": {"calls": 40, "bytes": 40 * 4096, "by_advice": {"4": [40, 40 * 4096]}}}
    assert madvise_storm.check(view(process(syscalls={"madvise": 40}, args=args))) == []
    # 121 munmap calls in a 13 s multi-threaded run: immaterial, silent (issue 20's table).
    args = {"munmap": {"calls": 121, "bytes": 121 * (8 << 20)}}
    quiet = process(wall_ms=13_000, user_ms=20_000, sys_ms=600, syscalls={"munmap": 121, "mmap": 130}, args=args)
    assert mmap_churn.check(view(quiet)) == []


# ---- words from the arguments -----------------------------------------------------------------

def _madvise(by_advice: dict, calls: int, faults=0) -> CellView:
    nbytes = sum(v[1] for v in by_advice.values())
    return view(process(sys_ms=600, user_ms=400, minflt=faults, syscalls={"madvise": calls},
                        args={"madvise": {"calls": calls, "bytes": nbytes, "by_advice": by_advice}}))


@pytest.mark.parametrize("advice,family,title", [
    ({"4": [100_000, 100_000 * 65536]}, "purge", "Madvise storm"),
    ({"23": [20_000, 20_000 * 262144], "0": [20_000, 20_000 * 262144]}, "prefault", "Prefaulting"),
    ({"12": [400_000, 400_000 * 4096]}, "merge", "Same-page merging"),
    ({"21": [50_000, 50_000 * 65536]}, "reclaim", "Reclaim hints"),
    ({"0": [900_000, 900_000 * 4096]}, "hint", "Access hints"),
    ({"14": [900_000, 900_000 * 4096]}, "huge pages", "Huge-page hints"),
])
def test_madvise_is_worded_from_its_advice(advice, family, title):
    calls = sum(v[0] for v in advice.values())
    found = madvise_storm.check(_madvise(advice, calls, faults=calls // 2))
    assert len(found) == 1
    f = found[0]
    assert f.numbers["family"] == family and f.title.startswith(title), f.title
    assert f.id == ("madvise-storm" if family == "purge" else "madvise-calls")
    consistent(f)


def test_a_trim_page_by_page_at_teardown_is_named_with_its_phase():
    # CPython's teardown (issue 20's table): the heap grows to 300 MiB in 1.6 s, then the break
    # moves down a page at a time, 200k times, in the last second while RSS falls.
    rows = []
    for i in range(266):
        t = i * 10
        if t <= 1600:
            rss, brk = 1000 + t * 190, 50
        else:
            rss, brk = max(2000, 305_000 - (t - 1600) * 300), 50 + (t - 1600) * 200
        rows.append({"t_ms": t, "rss_kb": rss, "brk": brk})
    args = {"brk": {"calls": 200_050, "up_moves": 40, "up_bytes": 300 << 20, "down_moves": 200_000,
                    "down_bytes": 200_000 * 4096}}
    s = process(wall_ms=2650, user_ms=1300, sys_ms=1300, minflt=77_000, maxrss_kb=305_000,
                syscalls={"brk": 200_050}, args=args, rows=rows)
    found = heap_trim.check(view(s))
    assert [f.id for f in found] == ["heap-trim-churn"]
    f = found[0]
    assert "a page or two at a time" in f.mechanism and f.phase == "teardown"
    assert any(e.startswith("teardown:") and "long-running server pays it once" in e for e in f.evidence)
    consistent(f)


def test_mmap_churn_is_costed_by_its_calls_without_refaults():
    args = {"munmap": {"calls": 3000, "bytes": 3000 << 20}, "mmap": {"calls": 3000, "bytes": 3000 << 20}}
    s = process(wall_ms=40, user_ms=1, sys_ms=30, minflt=3000, maxrss_kb=2000,
                syscalls={"mmap": 3000, "munmap": 3000}, args=args)
    found = mmap_churn.check(view(s))
    assert [f.id for f in found] == ["mmap-churn"]
    assert "the calls themselves" in found[0].mechanism and "faulted in again" not in found[0].mechanism
    consistent(found[0])


def test_mremap_growth_churn_from_outside():
    args = {"mremap": {"calls": 16_352, "grow_calls": 16_352, "grow_bytes": 64 << 20}}
    s = process(wall_ms=400, user_ms=300, sys_ms=90, minflt=16_400, maxrss_kb=66_000,
                syscalls={"mremap": 16_352}, args=args)
    found = mremap_churn.check(view(s))
    assert [f.id for f in found] == ["mremap-churn"] and found[0].cost_share >= cost.MATERIAL_SHARE
    consistent(found[0])


def test_zero_page_reads_from_outside_need_the_arguments():
    # ms-run writes each call whose tracepoint opened, made or not; one that did not open is absent
    recorded = {"munmap": {"calls": 1, "bytes": 4096}, "madvise": {"calls": 0, "bytes": 0, "by_advice": {}},
                "brk": {"calls": 0, "up_moves": 0, "up_bytes": 0, "down_moves": 0, "down_bytes": 0}}
    s = process(wall_ms=150, user_ms=30, sys_ms=110, minflt=131_132, maxrss_kb=1400, args=recorded)
    found = zero_page.check(view(s))
    assert [f.id for f in found] == ["zero-page-read"]
    consistent(found[0])
    # munmap's tracepoint did not open (no root, no tracefs): what it gave back is unknown, not 0 bytes
    unknown = process(wall_ms=150, user_ms=30, sys_ms=110, minflt=131_132, maxrss_kb=1400,
                      args={k: v for k, v in recorded.items() if k != "munmap"})
    assert zero_page.check(view(unknown)) == []
    # Memory given back and faulted again also leaves RSS below the faults: not the zero page.
    churn = process(wall_ms=150, user_ms=30, sys_ms=110, minflt=131_132, maxrss_kb=1400,
                    args={**recorded, "munmap": {"calls": 500, "bytes": 500 << 20}})
    assert zero_page.check(view(churn)) == []
    assert zero_page.check(view(process(minflt=131_132, maxrss_kb=1400))) == []   # no arguments recorded


def test_findings_come_ordered_by_cost():
    args = {"munmap": {"calls": 3000, "bytes": 3000 << 20}, "brk": {"calls": 5000, "up_moves": 2500,
            "up_bytes": 2500 * 4096, "down_moves": 2500, "down_bytes": 2500 * 4096}}
    s = process(wall_ms=200, user_ms=50, sys_ms=150, minflt=10_000, maxrss_kb=4000,
                syscalls={"mmap": 3000, "munmap": 3000, "brk": 5000}, args=args)
    found = findings.for_cell(view(s))
    shares = [f.cost_share for f in found]
    assert len(found) >= 2 and shares == sorted(shares, reverse=True)
    for f in found:
        consistent(f)


# ---- nothing material ---------------------------------------------------------------------------

def test_a_clean_run_gets_one_line_with_its_largest_part():
    v = view(process(wall_ms=1000, user_ms=980, sys_ms=20, minflt=2000, syscalls={"brk": 30}))
    assert findings.for_cell(v) == []
    line = analysis.quiet_line([v], [])
    assert line.startswith("No memory mechanism costs 5% of this run's CPU time")
    assert "page-faults" in line and "= 0.2%" in line


def test_a_material_part_no_rule_names_is_never_said_to_cost_under_the_floor():
    """Page faults of 30% of the CPU time in a tree whose faults no rule explains (a compiler's
    processes): the line says no finding names them, never that no mechanism costs 5%."""
    v = view(process(wall_ms=1000, user_ms=700, sys_ms=300, minflt=60_000, syscalls={"brk": 30}))
    line = findings.quiet_line(v)
    assert not line.startswith("No memory mechanism costs"), line
    assert line.startswith("No finding names a memory mechanism here, though page-faults cost 5%"), line


# ---- who makes the calls -------------------------------------------------------------------------

def test_counts_inside_their_spread_are_the_programs():
    got = analysis.count_attribution({"glibc": [1000, 1010, 990], "mimalloc": [1002, 995, 1008]}, True, "madvise")
    assert got[0] == "program"


def test_counts_beyond_their_spread_are_the_allocators_for_fixed_work():
    got = analysis.count_attribution({"glibc": [0, 1, 0], "jemalloc": [1100, 1150, 1090]}, True, "madvise")
    assert got[0] == "allocator"


def test_futex_counts_never_blame_the_allocator_by_themselves():
    # Issue 20: a program's own mutex, 19/11/18 futex calls under one allocator, 14,577-23,892 under
    # another (scheduling): disjoint, but the counts cannot say who makes them.
    got = analysis.count_attribution({"glibc": [19, 11, 18], "tcmalloc": [14_577, 23_892, 18_000]}, True, "futex")
    assert got[0] == "undetermined" and "call sites decide" in got[1]


def test_a_fixed_duration_benchmark_cannot_blame_the_allocator_from_counts():
    got = analysis.count_attribution({"a": [100, 110, 105], "b": [300, 310, 305]}, False, "madvise")
    assert got[0] == "undetermined"


def test_overlapping_but_different_counts_decide_nothing():
    assert analysis.count_attribution({"a": [100, 200, 150], "b": [180, 260, 220]}, True, "munmap") is None


def test_kernel_time_speaks_only_for_memory_work_no_rule_named():
    from memsleuth.analysis.findings import kernel_time
    # A short interpreter run: 57 ms of kernel time, 9,415 faults (about 9 ms here): exec and
    # start-up's mappings, not memory behaviour. Silent; the run's one line has the total.
    startup = view(process(wall_ms=160, user_ms=95, sys_ms=57, minflt=9415, syscalls={"mmap": 200, "brk": 20}))
    assert kernel_time.check(startup) == []
    assert "all kernel time 57 ms" in analysis.quiet_line([startup], [])
    # Faults everywhere, no rule's shape: 120,000 faults = 120 ms of 150 ms kernel time.
    faulty = view(process(wall_ms=300, user_ms=150, sys_ms=150, minflt=120_000, maxrss_kb=4000))
    (f,) = kernel_time.check(faulty)
    assert f.numbers["culprit"] == "page-faults"


def test_mmap_churn_names_the_blocks_size_from_the_calls_not_its_size_class():
    """40 MiB blocks sit in the 32-64 MiB size class: the advice names about 40 MiB, not the class's 32."""
    blocks = 40 << 20
    args = {"munmap": {"calls": 100, "bytes": 100 * blocks, "sizes": [[32 << 20, 100]]},
            "mmap": {"calls": 100, "bytes": 100 * blocks}}
    s = process(wall_ms=2000, user_ms=200, sys_ms=1500, minflt=100 * blocks // 4096, maxrss_kb=50_000,
                syscalls={"mmap": 100, "munmap": 100}, args=args)
    (f,) = mmap_churn.check(view(s))
    assert "blocks of about 40.0 MiB" in f.advice and "32.0 MiB (its" not in f.advice, f.advice


def test_the_blocks_size_is_its_size_classs_own_mean_beside_a_runtimes_small_unmaps():
    """An interpreter's 50 MiB buffers beside its own 42 small unmaps and 39 of 2 MiB: the calls'
    overall average (41 MiB) is not a block's size; the class's recorded bytes over its calls are."""
    blocks = 50 << 20
    sizes = [[32768, 42, 1_657_446], [2 << 20, 39, 81_948_672], [32 << 20, 200, 200 * blocks]]
    total = sum(r[2] for r in sizes)
    args = {"munmap": {"calls": 281, "bytes": total, "sizes": sizes}, "mmap": {"calls": 281, "bytes": total}}
    s = process(wall_ms=6000, user_ms=600, sys_ms=5000, minflt=200 * blocks // 4096, maxrss_kb=60_000,
                syscalls={"mmap": 281, "munmap": 281}, args=args)
    (f,) = mmap_churn.check(view(s))
    assert "blocks of about 50.0 MiB" in f.advice, f.advice


def test_resident_memory_that_ramps_then_holds_does_not_grow_to_the_end():
    from memsleuth.analysis.findings import rss_growth
    # 3 s: 500 MiB filled in the first 1.2 s, then held (a working set), against the same 500 MiB
    # added steadily to the end (a leak's shape).
    ramp = [{"t_ms": t, "rss_kb": min(t, 1200) * 430 + 2000} for t in range(0, 3000, 10)]
    steady = [{"t_ms": t, "rss_kb": t * 172 + 2000} for t in range(0, 3000, 10)]
    assert rss_growth.check(view(process(wall_ms=3000, maxrss_kb=520_000, rows=ramp))) == []
    found = rss_growth.check(view(process(wall_ms=3000, maxrss_kb=520_000, rows=steady)))
    assert [f.id for f in found] == ["rss-growth"]
    assert any("in the second half of that window" in e for e in found[0].evidence)


def test_a_share_is_never_rounded_onto_a_threshold_it_did_not_reach():
    assert [cost.pct(s) for s in (0.0003, 0.046, 0.0949, 0.095, 0.31)] == ["under 0.1%", "4.6%", "9.5%", "10%", "31%"]


def test_advice_that_holds_whoever_makes_the_calls_stays_first():
    from memsleuth.analysis.findings.base import Finding
    f = Finding(id="mmap-churn", title="t", mechanism="m", evidence=[], advice="huge; reuse", confidence="high",
                advice_first="huge")
    assert f.with_advice("change the program") == "huge; change the program"
    assert f.with_advice("huge; reuse") == "huge; reuse"
    # a runtime's own advice quoting the rule's after it: the first advice is said once, first
    assert f.with_advice("out= arguments; on the allocator's side: huge; reuse") == \
        "huge; out= arguments; on the allocator's side: reuse"
    # where the quote was the first advice alone, its label goes with it
    assert f.with_advice("out= arguments; on the allocator's side: huge") == "huge; out= arguments"
    assert Finding(id="x", title="t", mechanism="m", evidence=[], advice="a", confidence="low").with_advice("b") == "b"


def test_the_churned_share_of_fresh_mappings_is_weighed_by_time_where_the_samples_were_counted():
    """A library's thousands of small first touches against a few huge pages zeroed per churned
    mapping: by count, a fifth of the mappings' faults churned; by the CPU samples taken in them
    (ms-run's mapped_samples), 95% of their time did. The causes weigh by time where the samples
    were joined, by count where they were not."""
    from memsleuth.analysis.view import FaultTrace
    from memsleuth.records.syscall_args import FaultSamples
    doc = {"every": 1, "mapped_churned": 2000, "mapped_samples": 400, "mapped_churned_samples": 380,
           "by_release": {"none": [100, 0, 100], "munmap": [0, 0, 0], "mapped": [10_000, 0, 10_000]}}
    trace = FaultTrace.of(FaultSamples.from_dict(doc))
    by_time, how = trace.causes({"mapped": 390, "none": 10})
    assert how == "time" and by_time["munmap"] == pytest.approx(0.975 * 0.95)
    assert by_time["none"] == pytest.approx(0.025 + 0.975 * 0.05)
    by_count, how = trace.causes(None)
    assert how == "count" and by_count["munmap"] == pytest.approx(10_000 / 10_100 * 0.2)
    older = FaultTrace.of(FaultSamples.from_dict({k: v for k, v in doc.items() if "samples" not in k}))
    assert older.causes({"mapped": 390, "none": 10})[0]["munmap"] == pytest.approx(0.975 * 0.2)
    assert trace.traced_share == 1.0                                     # every tick traced
    part = FaultTrace.of(FaultSamples.from_dict({**doc, "every": 20, "traced_share": 0.05}))
    assert part.traced_share == 0.05 and part.causes(None) == trace.causes(None)   # the counts were scaled
    assert FaultSamples.from_dict({**doc, "traced_share": "x"}).traced_share == 1.0   # a damaged field


def test_arguments_from_a_run_whose_count_differs_far_from_the_measured_one_say_both_counts():
    """A Go program's scavenger: 724 madvise calls in the measured run, 6,153 in the slower explaining
    run whose arguments word the finding. Each number is said with its run; a count near the
    measured one adds nothing."""
    def storm(recorded: int):
        args = {"madvise": {"calls": recorded, "bytes": 12 << 30,
                            "by_advice": {"4": [recorded, 12 << 30]}}}
        s = process(wall_ms=2000, user_ms=900, sys_ms=900, minflt=200_000, syscalls={"madvise": 724}, args=args)
        return madvise_storm.check(view(s))
    [f] = storm(6153)
    assert any("the explaining run made 6,153 of these calls, the measured run 724" in e for e in f.evidence), f.evidence
    [g] = storm(800)
    assert not any("explaining run made" in e for e in g.evidence), g.evidence


def test_a_clean_answer_names_the_system_call_that_holds_the_kernel_time_instead():
    """A program reading a file in the page cache through one buffer: read() holds 99% of the samples
    (6.18 names it by ksys_read). The clean line says so; a memory path or user time never is."""
    from types import SimpleNamespace
    v = view(process(wall_ms=1500, user_ms=1, sys_ms=1500, minflt=300))
    v.__dict__["profile"] = SimpleNamespace(samples=3041, counts={"read": 3017, "page-faults": 6, "user": 5})
    assert findings._elsewhere(v) == ("; the explaining run's samples put 99% of the CPU time in the read system "
                                      "call, which is not a memory mechanism")
    v.__dict__["profile"] = SimpleNamespace(samples=3041, counts={"munmap": 3017, "user": 24})
    assert findings._elsewhere(v) == ""
    v.__dict__["profile"] = SimpleNamespace(samples=3041, counts={"read": 100, "user": 2941})
    assert findings._elsewhere(v) == ""
