"""Statistics on distributions whose answers are known."""
from __future__ import annotations

import numpy as np
import pytest

from memsleuth import stats


def test_order_statistic_ranks_and_exact_coverage():
    assert stats.median_ci_ranks(5) is None                       # [min, max] covers only 93.75%
    assert stats.median_ci_ranks(6) == (1, 6, pytest.approx(1 - 2 / 64))
    assert stats.median_ci_ranks(10) == (2, 9, pytest.approx(1 - 2 * 11 / 1024))


def test_small_samples_get_no_ci():
    e = stats.median_ci([3.0, 1.0, 2.0])
    assert e.median == 2.0 and e.low is None and e.high is None and e.n == 3


def test_ci_covers_the_true_median_at_least_at_the_stated_rate():
    # Log-normal (skewed like run times): true median is exp(mu).
    rng = np.random.default_rng(12345)
    mu, trials, n = 1.0, 2000, 15
    covered = 0
    for _ in range(trials):
        e = stats.median_ci(rng.lognormal(mu, 0.5, n))
        covered += e.low <= np.exp(mu) <= e.high
    # Exact coverage for n=15 is >= 95%; allow 3 standard errors of binomial noise below it.
    rate = covered / trials
    assert rate >= 0.95 - 3 * np.sqrt(0.95 * 0.05 / trials)


def test_paired_ratio_is_invariant_to_a_common_drift():
    rng = np.random.default_rng(7)
    a = rng.normal(100, 1, 12)
    b = rng.normal(80, 1, 12)
    drift = np.linspace(0.5, 2.0, 12)  # the machine slows down and speeds up for both alike
    plain = stats.paired_ratio(a, b)
    drifted = stats.paired_ratio(a * drift, b * drift)
    assert drifted.median == pytest.approx(plain.median)
    assert drifted.low == pytest.approx(plain.low) and drifted.high == pytest.approx(plain.high)


def test_paired_ratio_rejects_unequal_series():
    with pytest.raises(ValueError):
        stats.paired_ratio([1.0, 2.0], [1.0])


def test_cv():
    assert stats.cv([1.0]) is None
    assert stats.cv([2.0, 2.0, 2.0]) == 0.0


def test_adaptive_rounds_stop_exactly_when_the_target_is_met():
    from memsleuth.measure.runner import cell_settled
    tight = [100.0, 101, 99, 100, 100.5, 99.5]
    assert cell_settled(tight, 0.02, 6)                    # a CI exists and is within +-2%
    assert not cell_settled(tight[:5], 0.02, 6)            # fewer than the minimum: go on
    assert not cell_settled(tight, 0.02, 8)                # a higher minimum: go on
    assert not cell_settled(tight, None, 6)                # fixed rounds: never settled early
    wild = [100.0, 180, 60, 140, 75, 120]
    assert not cell_settled(wild, 0.5, 6) and cell_settled(wild, 0.6, 6)   # CI [60, 180]: ±55%


def test_time_averaged_rss_never_exceeds_the_peak_of_the_same_run():
    from memsleuth.records.evidence import Sample
    # ru_maxrss (one process) below the tree's timeline (two processes): one definition of peak.
    doc = {"status": "ok", "maxrss_kb": 2086,
           "timeline": {"columns": ["t_ms", "rss_kb"], "rows": [[0, 1900], [10, 2150], [20, 2120], [30, 2100]]}}
    s = Sample.from_msrun(doc)
    assert s.maxrss_kb == 2150 and s.mean_rss_kb <= s.maxrss_kb
    # points out of time order (a negative trapezoid would lift the average above every point)
    doc["timeline"]["rows"] = [[0, 2150], [30, 2150], [5, 100], [6, 100]]
    s = Sample.from_msrun(doc)
    assert s.mean_rss_kb <= s.maxrss_kb == 2150


def _rss_run(peak_kb: int, points: list[tuple[int, int]]) -> dict:
    return {"status": "ok", "wall_ns": 5_000_000, "maxrss_kb": peak_kb,
            "timeline": {"columns": ["t_ms", "rss_kb"], "rows": [list(p) for p in points]}}


def test_a_run_too_short_for_two_timeline_points_has_no_average():
    from memsleuth.records.evidence import Sample
    # one point, read as the program was exec'd: no average of the run
    assert Sample.from_msrun(_rss_run(2016, [(0, 200)])).mean_rss_kb is None
    assert Sample.from_msrun(_rss_run(2016, [])).mean_rss_kb is None
    assert Sample.from_msrun(_rss_run(2016, [(0, 1800), (10, 2000)])).mean_rss_kb == 1900


def test_the_summaries_of_time_averaged_and_peak_rss_are_ordered_by_construction():
    """Stored as they were beside two busy loops: six runs, one too short for a timeline. The old
    summary took the averages' median over five runs and the peaks' over six: 2,119 > 2,072 KiB."""
    from memsleuth.analysis.summary import summarise_cell
    from memsleuth.records.evidence import Sample
    from memsleuth.records.model import AllocatorInfo
    from memsleuth.records.stored import StoredCell
    docs = [_rss_run(p, [(0, p - 40), (10, p - 1)]) for p in (2140, 2120, 2120, 2024, 2016)]
    docs.insert(4, _rss_run(2016, []))
    cell = StoredCell(1, 0, AllocatorInfo("glibc"), {}, {}, ["x"],
                      [(i, False, Sample.from_msrun(d)) for i, d in enumerate(docs)])
    s = summarise_cell(cell)
    assert s.peak_rss.n == 6 and s.peak_rss.median == 2072
    assert s.mean_rss is None                      # not every run has one: no summary over other runs
    # every run long enough: the same runs, so median and CI bounds are each at most the peak's
    cell.samples[4] = (4, False, Sample.from_msrun(_rss_run(2016, [(0, 2000), (10, 2016), (30, 1000)])))
    s = summarise_cell(cell)
    assert s.mean_rss.n == s.peak_rss.n == 6
    assert s.mean_rss.median <= s.peak_rss.median and s.mean_rss.low <= s.peak_rss.low
    assert s.mean_rss.high <= s.peak_rss.high


def test_the_fixed_wall_time_warning_survives_load():
    """A 2 s fixed-duration benchmark on a loaded machine: the medians 1.5-2.0% apart (load adds to
    some runs), the shortest runs within 0.3% of the duration."""
    from memsleuth.records.evidence import Sample
    from memsleuth.analysis.quality import fixed_wall_time

    def runs(walls):
        return [Sample.from_msrun({"status": "ok", "wall_ns": int(w * 1e9), "stdout_tail": "ops: 123456"})
                for w in walls]
    a = runs([2.001, 2.030, 2.035, 2.040, 2.045, 2.050])
    b = runs([2.003, 2.060, 2.065, 2.072, 2.080, 2.090])
    from statistics import median
    cells = [("wall_s", median(s.wall_ns / 1e9 for s in x), x) for x in (a, b)]
    assert cells[1][1] / cells[0][1] > 1.015
    assert [w.code for w in fixed_wall_time(cells)] == ["wall-fixed"]
    work = [("wall_s", 2.0, runs([2.0] * 6)), ("wall_s", 2.3, runs([2.3] * 6))]   # fixed work: 15% apart
    near = [("wall_s", 2.0, runs([2.0] * 6)), ("wall_s", 2.06, runs([2.06] * 6))]  # 3% apart: not fixed
    assert fixed_wall_time(near) == []
    assert fixed_wall_time(work) == []


def _busy_run(cells: dict[str, tuple[float, list[float]]], blocks: int = 2):
    """A stored compare of a command: per allocator (CPU seconds per round, wall stretch per round): each
    run's wall time is its CPU time times the stretch other work on the machine gave that round."""
    from memsleuth.records.evidence import Sample
    from memsleuth.records.model import AllocatorInfo, MachineInfo, RunSpec
    from memsleuth.records.stored import StoredCell, StoredRun
    stored = []
    for i, (name, (cpu_s, stretch)) in enumerate(cells.items()):
        samples = []
        for r, k in enumerate(stretch):
            cpu = cpu_s * (1 + 0.004 * ((r * 7 + i) % 5 - 2))          # CPU time: within ±1%
            samples.append((r, False, Sample.from_msrun({"status": "ok", "wall_ns": int(cpu * k * 1e9),
                                                         "user_ns": int(cpu * 0.97e9), "sys_ns": int(cpu * 0.03e9),
                                                         "nvcsw": blocks, "maxrss_kb": 1000})))
        stored.append(StoredCell(i + 1, i, AllocatorInfo(name), {}, {}, ["lua5.4", "prog.lua"], samples))
    return StoredRun(1, "t", "t", "complete", "compare", "lua5.4", ["memsleuth"], RunSpec(), MachineInfo(), "0",
                     stored)


# Per round, how much other work stretched the wall time (beside two busy loops: up to 2x).
BUSY = [1.0, 1.6, 1.1, 1.9, 1.3, 1.0, 1.7, 1.2, 1.5, 1.05]


def test_a_cpu_bound_command_on_a_busy_machine_is_judged_by_paired_cpu_time():
    from memsleuth.analysis.summary import analyse, standings
    from memsleuth.report.wording import compare_answer
    run = _busy_run({"glibc": (1.51, BUSY), "mimalloc": (1.11, BUSY[3:] + BUSY[:3]),
                     "jemalloc": (1.43, BUSY[6:] + BUSY[:6])})
    (g,) = analyse(run)
    assert g.time_basis.metric == "cpu_s" and all(c.metric == "cpu_s" for c in g.cells)
    best = next(c for c in g.cells if c.is_best)
    assert best.cell.allocator.name == "mimalloc" and best.best_resolved
    assert all(c.verdict.kind == "slower" for c in g.cells if c is not best)
    lines = compare_answer(standings([g], []))
    assert lines[0].startswith("Judged by CPU time") and "CPU-bound" in lines[0]
    assert lines[1].startswith("Fastest, resolved by paired rounds: mimalloc")
    # diff and trend read the same runs alike, by wall time
    assert analyse(run, cpu_time=False)[0].cells[0].metric == "wall_s"
    # two busy loops on two CPUs: it runs a third of its wall time, waiting for a CPU, never blocking
    starved = _busy_run({"glibc": (1.51, [3 * k for k in BUSY]), "mimalloc": (1.11, [3 * k for k in BUSY[3:] + BUSY[:3]])})
    assert analyse(starved)[0].time_basis.metric == "cpu_s"


def test_a_command_that_waits_keeps_wall_time_and_says_how_noisy_it_was():
    from memsleuth.analysis.summary import analyse, standings
    from memsleuth.report.wording import compare_answer
    waits = [3.0 * k for k in BUSY]       # CPU time a third of the wall time: the program waits, blocking
    run = _busy_run({"glibc": (1.0, waits), "mimalloc": (0.9, waits[2:] + waits[:2])}, blocks=2000)
    (g,) = analyse(run)
    assert g.time_basis.metric == "wall_s" and all(c.metric == "wall_s" for c in g.cells)
    assert compare_answer(standings([g], []))[0].startswith("Judged by wall time"), compare_answer(standings([g], []))


def test_the_memory_table_calls_a_cell_the_fastest_only_where_that_was_resolved():
    """Two allocators whose CPU times do not differ: no winner resolved, and the Memory table does not
    call the lower median 'the fastest'."""
    from memsleuth.analysis.summary import analyse
    from memsleuth.report.builders.compare import memory_table
    same = _busy_run({"glibc": (1.0, [1.0] * 10), "mimalloc": (1.0, [1.0] * 10)})
    (g,) = analyse(same)
    assert not any(c.best_resolved for c in g.cells)
    words = [row[-1] for row in memory_table([g], []).rows]
    assert "the fastest" not in words and "the lowest median time (no winner resolved)" in words, words


def _harness_run(own: dict[str, float], harness_ns: float = 7.0):
    """A stored compare of a workload with a harness region: per allocator, its own ns/op (main minus
    harness), each round within +-0.3 ns of it."""
    from memsleuth.records.evidence import Sample
    from memsleuth.records.model import AllocatorInfo, MachineInfo, RunSpec
    from memsleuth.records.stored import StoredCell, StoredRun
    ops = 10**7
    stored = []
    for i, (name, ns) in enumerate(own.items()):
        samples = []
        for r in range(6):
            main = harness_ns + ns + 0.1 * ((r * 5 + i) % 7 - 3)
            regions = [{"type": "region", "name": "main", "ops": ops, "wall_ns": int(main * ops)},
                       {"type": "region", "name": "harness", "ops": ops, "wall_ns": int(harness_ns * ops)}]
            samples.append((r, False, Sample.from_msrun({"status": "ok", "wall_ns": int(main * ops * 1.1),
                                                         "user_ns": int(main * ops), "probe": regions,
                                                         "maxrss_kb": 1000})))
        stored.append(StoredCell(i + 1, i, AllocatorInfo(name), {}, {}, ["threads-stress"], samples))
    return StoredRun(1, "t", "t", "complete", "compare", "threads-stress", ["memsleuth"], RunSpec(), MachineInfo(),
                     "0", stored)


def test_own_costs_are_compared_only_where_the_least_is_above_zero():
    """16 threads of threads-stress on 16 cores: own costs 3.4, -0.2, -0.8 and -1.4 ns/op. The table
    had called glibc's 3.4 "least" and mimalloc's 0.06x of it."""
    from memsleuth.analysis.summary import analyse
    from memsleuth.report.builders.compare import cost_table
    (g,) = analyse(_harness_run({"glibc": 3.4, "mimalloc": -0.2, "jemalloc": -0.8, "tcmalloc": -1.4}))
    assert all(c.own_ratio is None for c in g.cells)
    t = cost_table([g], [])
    assert [row[-1] for row in t.rows] == ["-"] * 4 and "no ratio is given" in " ".join(t.notes)
    (g,) = analyse(_harness_run({"glibc": 32.2, "tcmalloc": 2.7}))     # one thread: every own cost above zero
    by = {c.cell.allocator.name: c.own_ratio for c in g.cells}
    assert by["tcmalloc"].median == 1.0 and 10 < by["glibc"].median < 13
    assert "no ratio is given" not in " ".join(cost_table([g], []).notes)
