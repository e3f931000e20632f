"""Latency histograms (memsleuth.latency) on synthetic data, and the real workloads' output."""
import pytest

from memsleuth.analysis import latency


def test_quantile_reads_the_upper_edge_of_the_bucket_holding_the_rank():
    b = [(10, 50), (20, 49), (100, 1)]
    assert latency.quantile(b, 0.5) == 10
    assert latency.quantile(b, 0.51) == 20
    assert latency.quantile(b, 0.99) == 20
    assert latency.quantile(b, 0.999) == 100
    assert latency.quantile(b, 1.0) == 100


def test_quantile_of_one_sample_and_of_nothing():
    assert latency.quantile([(7, 1)], 0.999) == 7
    with pytest.raises(ValueError):
        latency.quantile([], 0.5)


def test_merge_sums_buckets_across_runs():
    assert latency.merge([[[10, 1], [20, 2]], [[20, 3], [40, 1]]]) == [(10, 1), (20, 5), (40, 1)]


def test_summarise_merges_runs_and_keeps_the_exact_max():
    r1 = {"latency": {"every": 64, "timer_ns": 17, "ops": {"malloc": {"n": 3, "max": 95, "sum": 150,
                                                                      "buckets": [[15, 1], [39, 1], [103, 1]]}}}}
    r2 = {"latency": {"every": 64, "timer_ns": 17, "ops": {"malloc": {"n": 1, "max": 12, "sum": 12,
                                                                      "buckets": [[12, 1]]}}}}
    s = latency.summarise([r1, r2, None, {}])
    m = s["malloc"]
    assert m.n == 4 and m.max == 95 and m.mean == pytest.approx(162 / 4)
    assert m.p50 == 15 and m.p99 == 103
    assert latency.sampling_info([None, r1]) == (64, 17.0)


def test_sampling_cost_share():
    assert latency.sampling_cost_share(1000, 20.0, 1e6) == pytest.approx(0.02 * latency.SAMPLE_COST_TIMERS)
    assert latency.sampling_cost_share(1, 20.0, 0) is None
