"""Timed rounds that count no syscall by name (ms-run --no-syscalls) and the warm-up that counts them
for them (records.evidence.with_counts, StoredCell, Plan.quiet_rounds); stored documents, no processes."""
from __future__ import annotations

from memsleuth.analysis import summary
from memsleuth.measure import plan as planning
from memsleuth.records.evidence import COUNTING_RUN, NOT_COUNTED, Sample, with_counts
from memsleuth.records.model import AllocatorInfo
from memsleuth.records.stored import EXPLAIN_ROUND, StoredCell
from memsleuth.analysis.cost import UnitCosts
from memsleuth.report.wording import who_text

NOT = {name: NOT_COUNTED for name in ("mmap", "munmap", "madvise", "futex")}


def _region(name: str, **syscalls) -> dict:
    return {"type": "region", "name": name, "depth": 0, "ops": 10, "wall_ns": 10**6, "user_ns": 0, "sys_ns": 0,
            "counters": {}, "syscalls": syscalls}


def _timed(*regions) -> Sample:
    return Sample.from_msrun({"status": "ok", "wall_ns": 10**9, "minflt": 1000, "syscalls_counted": False, "syscalls": {},
                              "unsupported": {**NOT, "cycles": "no PMU"}, "probe": list(regions)})


def _counting(madvise: int, *regions) -> Sample:
    return Sample.from_msrun({"status": "ok", "wall_ns": 2 * 10**9, "sys_ns": 10**9, "probe": list(regions),
                              "syscalls": {"mmap": 8, "munmap": 1, "madvise": madvise, "futex": 0},
                              "unsupported": {"cycles": "no PMU"}})


def test_a_timed_run_takes_its_counting_runs_median_counts_and_says_so():
    got = with_counts(_timed(), [_counting(300), _counting(100), _counting(200)])
    assert got.syscalls == {"mmap": 8, "munmap": 1, "madvise": 200, "futex": 0}
    assert got.syscalls_from == COUNTING_RUN and not got.syscalls_counted
    assert got.unsupported == {"cycles": "no PMU"}        # the timed run's "not counted" reasons are gone
    assert got.wall_ns == 10**9                           # its own time, not the counting run's


def test_regions_take_the_same_regions_counts_by_name_and_occurrence():
    timed = _timed(_region("step"), _region("step"), _region("main"))
    counting = _counting(5, _region("step", madvise=1), _region("step", madvise=7), _region("main", madvise=9))
    got = with_counts(timed, [counting])
    assert [(r.name, r.syscalls["madvise"]) for r in got.regions] == [("step", 1), ("step", 7), ("main", 9)]
    # a region the counting run did not have keeps no counts rather than borrowing another's
    lone = with_counts(_timed(_region("extra")), [counting])
    assert lone.regions[0].syscalls == {}


def test_a_run_that_counted_or_a_cell_without_a_counting_run_is_left_as_it_is():
    counted = _counting(7)
    assert with_counts(counted, [_counting(9)]) is counted
    timed = _timed()
    assert with_counts(timed, []) is timed and timed.syscalls == {} and timed.syscalls_from is None


def test_a_counting_run_that_could_not_count_passes_its_own_reason_on():
    refused = Sample.from_msrun({"status": "ok", "syscalls": {}, "unsupported": {"madvise": "not permitted"}})
    got = with_counts(_timed(), [refused])
    assert got.syscalls == {} and got.unsupported["madvise"] == "not permitted"
    assert got.syscalls_from is None and got.counted_in == ()     # nothing was counted anywhere: never said so


def _cell(madvise: list[int], warmups: int = 1) -> StoredCell:
    samples = [(-1, True, _counting(n)) for n in madvise[:warmups]]
    samples += [(r, False, _timed()) for r in range(3)]
    samples.append((EXPLAIN_ROUND, True, _counting(999_999)))     # its own libraries call too: never the source
    return StoredCell(1, 0, AllocatorInfo("glibc", None, "libc.so.6", None), {}, {}, ["prog"], samples)


def test_a_stored_cells_timed_rounds_read_its_warm_ups_counts_never_the_explaining_runs():
    cell = _cell([300])
    assert [s.syscalls["madvise"] for _, s in cell.measured()] == [300, 300, 300]
    assert all(s.syscalls_from == COUNTING_RUN for _, s in cell.measured())
    assert len(cell.counting_samples) == 1


def test_one_counting_run_per_allocator_decides_nothing_and_says_why():
    from memsleuth.analysis.findings.base import Finding
    cells = []
    units = UnitCosts(1000.0, 100.0, {}, count_ns=250.0)
    for name, n in (("glibc", 300_000), ("jemalloc", 3_000_000)):
        c = summary.summarise_cell(_cell([n]), None, [], units)
        c.cell.allocator = AllocatorInfo(name, None, "x.so", None)
        c.findings = [Finding("madvise-storm", "t", "m", [], "a", "high", calls="madvise")]
        cells.append(c)
    summary.attribute(cells)
    f = cells[0].findings[0]
    assert f.who == "undetermined" and "counted once per allocator" in f.who_why
    assert "--warmup 2" in who_text(f)
    assert not any(w.code == "counting" for c in cells for w in c.warnings)   # no counting cost in timed rounds
    # the same counts, counted in the timed runs themselves, are that cost
    counted = StoredCell(1, 0, AllocatorInfo("glibc", None, "libc.so.6", None), {}, {}, ["prog"],
                         [(r, False, _counting(3_000_000)) for r in range(3)])
    assert any(w.code == "counting" for w in summary.summarise_cell(counted, None, [], units).warnings)


def test_two_warm_ups_give_the_spread_that_lets_the_counts_decide():
    cells = []
    from memsleuth.analysis.findings.base import Finding
    for name, ns in (("glibc", [300_000, 300_010]), ("jemalloc", [3_000_000, 3_000_020])):
        c = summary.summarise_cell(_cell(ns, warmups=2), None, [], None)
        c.cell.allocator = AllocatorInfo(name, None, "x.so", None)
        c.findings = [Finding("madvise-storm", "t", "m", [], "a", "high", calls="madvise")]
        cells.append(c)
    summary.attribute(cells)
    assert cells[0].findings[0].who == "allocator"


def test_rounds_are_quiet_only_with_a_warm_up_to_count_and_no_per_round_count_verdict():
    cmd = planning.command_plan(["prog"], [], rounds=planning.Rounds.fixed(3), warmup=1, timeout_s=None,
                                mem_limit_bytes=None)
    assert cmd.quiet_rounds
    assert not planning.command_plan(["prog"], [], rounds=planning.Rounds.fixed(3), warmup=0, timeout_s=None,
                                     mem_limit_bytes=None).quiet_rounds          # check: no warm-up
    import dataclasses
    assert not dataclasses.replace(cmd, rounds_count=True).quiet_rounds         # gate, --try


def test_a_count_check_reads_each_counting_run_once_not_its_copies_in_every_round():
    from memsleuth.analysis import gate
    a = [s for _, s in _cell([300_000]).measured()]
    b = [s for _, s in _cell([3_000_000]).measured()]
    madvise = next(c for c in gate.count_checks("x", a, b, 0.10) if c.metric == "madvise calls")
    # five timed rounds a side would look like five identical runs: one warm-up a side is one count each
    assert madvise.n == (1, 1) and madvise.verdict == gate.UNRESOLVED
    assert "warm-ups that counted the calls" in madvise.text
    faults = next(c for c in gate.count_checks("x", a, b, 0.10) if c.metric == "page faults")
    assert faults.n == (3, 3)           # the timed runs' own counts, every one
