"""Statistics as pure functions: medians, distribution-free confidence intervals, paired ratios.

The CI of a median uses order statistics: for n samples, the interval [x_(k), x_(n-k+1)] covers
the true median with probability 1 - 2*P(Binomial(n, 1/2) < k), whatever the distribution. That
needs no normality, which run times (skewed, with a floor and a long right tail) never have. With
fewer than 6 samples no pair of order statistics reaches 95%, so no CI is given.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

MIN_SAMPLES_FOR_CI = 6  # smallest n whose [min, max] covers the median with >= 95% (1 - 2/64 = 96.9%)


@dataclass(frozen=True)
class Estimate:
    median: float
    low: float | None       # None when n is too small for the requested level
    high: float | None
    level: float | None     # the exact coverage of [low, high] (>= the requested level)
    n: int

    @property
    def half_width_rel(self) -> float | None:
        """CI half-width relative to the median (0.02 = +-2%)."""
        if self.low is None or self.high is None or self.median == 0:
            return None
        return (self.high - self.low) / 2 / abs(self.median)


def median_ci_ranks(n: int, level: float = 0.95) -> tuple[int, int, float] | None:
    """1-based ranks (k, n-k+1) and exact coverage of the narrowest symmetric order-statistic CI."""
    best = None
    for k in range(1, n // 2 + 1):
        coverage = 1 - 2 * binom_half_cdf(k - 1, n)
        if coverage >= level:
            best = (k, n - k + 1, float(coverage))
        else:
            break
    return best


def binom_half_cdf(k: int, n: int) -> float:
    """P(Binomial(n, 1/2) <= k), exactly: the sum of C(n, i) for i <= k over 2^n."""
    if k < 0:
        return 0.0
    return sum(math.comb(n, i) for i in range(min(k, n) + 1)) / (1 << n)  # exact integers, one division


def median_ci(values, level: float = 0.95) -> Estimate:
    x = sorted(float(v) for v in values)
    n = len(x)
    if n == 0:
        raise ValueError("no values")
    med = float(statistics.median(x))
    ranks = median_ci_ranks(n, level)
    if ranks is None:
        return Estimate(med, None, None, None, n)
    k, j, coverage = ranks
    return Estimate(med, float(x[k - 1]), float(x[j - 1]), coverage, n)


def paired_ratio(numerators: list[float], denominators: list[float], level: float = 0.95) -> Estimate:
    """Median and CI of the per-round ratio a_i / b_i of two interleaved series.

    Pairing by round cancels drift that hits both alternatives of a round alike (a noisy
    neighbour, frequency changes), which a ratio of medians would keep.
    """
    a = [float(v) for v in numerators]
    b = [float(v) for v in denominators]
    if len(a) != len(b) or len(a) == 0:
        raise ValueError("paired series must be non-empty and of equal length")
    return median_ci([x / y if y else (math.inf if x > 0 else math.nan if x == 0 else -math.inf)
                      for x, y in zip(a, b)], level)


def median_of(values) -> float | None:
    """The median of the values that are not None, or None when there are none."""
    v = [x for x in values if x is not None]
    return float(statistics.median(v)) if v else None


def paired_by_round(numerators: dict[int, float], denominators: dict[int, float],
                    level: float = 0.95) -> Estimate | None:
    """paired_ratio over the rounds both series have; None when they share none."""
    common = sorted(set(numerators) & set(denominators))
    if not common:
        return None
    return paired_ratio([numerators[r] for r in common], [denominators[r] for r in common], level)


def cv(values: list[float]) -> float | None:
    """Coefficient of variation (sample standard deviation / mean)."""
    x = [float(v) for v in values]
    if len(x) < 2 or statistics.fmean(x) == 0:
        return None
    return statistics.stdev(x) / statistics.fmean(x)


# ---- verdicts -------------------------------------------------------------------------------

DEFAULT_NOISE = 0.01  # a difference is called only when its whole CI lies beyond +-1%


@dataclass(frozen=True)
class Verdict:
    kind: str        # "slower", "faster" or "unresolved"
    text: str


def verdict(slowdown: Estimate, noise: float = DEFAULT_NOISE, subject: str = "") -> Verdict:
    """Reads a slowdown ratio (time_x / time_ref, > 1 means x is slower) and its CI.

    Called only when the whole CI lies outside [1/(1+noise), 1+noise]; otherwise the data cannot
    tell the two apart at that noise level and we say so.
    """
    who = f"{subject} is " if subject else ""
    if slowdown.low is None or slowdown.high is None:
        return Verdict("unresolved", f"no difference resolved (n={slowdown.n}: too few rounds for a CI)")
    if slowdown.low > 1 + noise:
        return Verdict("slower", f"{who}{slowdown.median:.2f}x slower [{slowdown.low:.2f}, {slowdown.high:.2f}]")
    if slowdown.high < 1 / (1 + noise):
        inv = (1 / slowdown.median, 1 / slowdown.high, 1 / slowdown.low)
        return Verdict("faster", f"{who}{inv[0]:.2f}x faster [{inv[1]:.2f}, {inv[2]:.2f}]")
    return Verdict("unresolved", "no difference resolved")


def bootstrap_ratio_of_medians(a: list[float], b: list[float], level: float = 0.95, resamples: int = 4000,
                               seed: int = 0) -> Estimate:
    """median(a) / median(b) for two independent samples (two separate runs), percentile bootstrap.

    Separate runs cannot be paired by round, so this resamples each side on its own. Seeded, so
    the same data always gives the same interval.
    """
    import numpy as np  # only here: the CLI starts without numpy

    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if len(x) == 0 or len(y) == 0:
        raise ValueError("no values")
    point = float(np.median(x) / np.median(y))
    if len(x) < 2 or len(y) < 2:
        return Estimate(point, None, None, None, min(len(x), len(y)))
    rng = np.random.default_rng(seed)
    mx = np.median(rng.choice(x, size=(resamples, len(x)), replace=True), axis=1)
    my = np.median(rng.choice(y, size=(resamples, len(y)), replace=True), axis=1)
    ratios = mx / my
    lo, hi = np.quantile(ratios, [(1 - level) / 2, 1 - (1 - level) / 2])
    return Estimate(point, float(lo), float(hi), level, min(len(x), len(y)))


# ---- outliers ---------------------------------------------------------------------------------

# Iglewicz & Hoaglin's modified z-score: 0.6745 * (x - median) / MAD; |z| > 3.5 marks an outlier.
# 0.6745 makes MAD comparable to a standard deviation under normality; 3.5 is their recommendation.
OUTLIER_Z = 3.5


def modified_z(values) -> list[float]:
    x = [float(v) for v in values]
    med = statistics.median(x)
    mad = statistics.median([abs(v - med) for v in x])
    if mad == 0:
        return [0.0] * len(x)
    return [0.6745 * (v - med) / mad for v in x]


def outliers(values: list[float], z: float = OUTLIER_Z) -> list[int]:
    """Indexes of the values whose modified z-score exceeds z."""
    return [i for i, v in enumerate(modified_z(values)) if abs(v) > z]
