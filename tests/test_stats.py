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
