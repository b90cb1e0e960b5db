"""Paired comparison of two runs over the same queries: wins, losses and ties, the paired t-test the GAREN paper
uses for its tables ("query-level paired t-test", p < 0.05), and a paired randomisation test.

The randomisation (sign-flip) test asks how often the mean per-query difference would be at least as far from 0
as the observed one if each query's two scores were exchangeable, i.e. if the sign of each difference were a coin
flip. Up to ``exact_up_to`` queries every one of the 2^n sign patterns is enumerated (the exact p-value); above
that, ``permutations`` random patterns are drawn from a fixed seed, and p = (1 + hits) / (1 + permutations), so a
p-value is never 0 and the same seed gives the same p-value.

A report compares many cells with one baseline; ``holm`` adjusts that family's p-values (Holm 1979: step-down
Bonferroni, controls the family-wise error rate without assuming independence). The confidence interval of the
mean difference is a paired percentile bootstrap: queries resampled with replacement, a fixed seed.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

TIE = 1e-9  # |a - b| at or below this is a tie (per-query nDCG values are sums of floats)
EXACT_UP_TO = 16  # 2^16 = 65,536 sign patterns: enumerated in well under a second
BOOTSTRAP = 10_000  # resamples of the confidence interval
CONFIDENCE = 0.95


@dataclass(frozen=True)
class PairedComparison:
    queries: int
    mean_a: float
    mean_b: float
    difference: float  # mean of a - b
    wins: int  # queries where a > b
    losses: int
    ties: int
    t_statistic: float
    t_test_p: float
    randomisation_p: float
    permutations: int  # sign patterns drawn; 0 when every pattern was enumerated
    ci_low: float = math.nan  # bootstrap confidence interval of ``difference``
    ci_high: float = math.nan
    confidence: float = CONFIDENCE
    # Holm-adjusted within the report's family of comparisons; None: not adjusted
    t_test_p_adjusted: float | None = None

    def to_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}


def paired_t_test(a, b) -> tuple[float, float]:
    """Two-sided paired t-test of a against b (scipy.stats.ttest_rel): (t, p). Identical runs give (0, 1), where
    scipy answers nan for the zero variance."""
    from scipy.stats import ttest_rel

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 2:
        return math.nan, math.nan
    if np.all(np.abs(a - b) <= TIE):
        return 0.0, 1.0
    result = ttest_rel(a, b)
    return float(result.statistic), float(result.pvalue)


def randomisation_test(
    a, b, permutations: int = 10_000, seed: int = 0, exact_up_to: int = EXACT_UP_TO
) -> tuple[float, int]:
    """Two-sided paired sign-flip test of mean(a - b) = 0: (p, patterns drawn; 0 = exact enumeration)."""
    diffs = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    n = len(diffs)
    if n == 0:
        return math.nan, 0
    observed = abs(diffs.mean())
    if n <= exact_up_to:
        signs = 1 - 2 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)  # every pattern of +1/-1
        means = np.abs(signs @ diffs) / n
        return float(np.mean(means >= observed - TIE)), 0
    rng = np.random.default_rng(seed)
    hits, left = 0, permutations
    while left:  # in chunks: 10,000 patterns x 10,000 queries would not fit in memory at once
        size = min(left, max(1, 2_000_000 // n))
        signs = 1 - 2 * rng.integers(0, 2, size=(size, n), dtype=np.int8)
        hits += int(np.sum(np.abs(signs @ diffs) / n >= observed - TIE))
        left -= size
    return (1 + hits) / (1 + permutations), permutations


def bootstrap_ci(
    a, b, resamples: int = BOOTSTRAP, confidence: float = CONFIDENCE, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(a - b): the queries resampled with replacement ``resamples`` times."""
    diffs = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    n = len(diffs)
    if n == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    means, left = [], resamples
    while left:  # in chunks, as the randomisation test: resamples x queries indices at once would not fit
        size = min(left, max(1, 2_000_000 // n))
        means.append(diffs[rng.integers(0, n, size=(size, n))].mean(axis=1))
        left -= size
    tail = (1 - confidence) / 2
    low, high = np.quantile(np.concatenate(means), [tail, 1 - tail])
    return float(low), float(high)


def holm(p_values) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given; NaN (no test) stays NaN and is not counted."""
    p = [math.nan if v is None else float(v) for v in p_values]
    order = sorted((i for i, v in enumerate(p) if not math.isnan(v)), key=lambda i: p[i])
    m, running, adjusted = len(order), 0.0, list(p)
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))  # monotone: never below a smaller p's adjustment
        adjusted[i] = running
    return adjusted


def compare_paired(a, b, permutations: int = 10_000, seed: int = 0, exact_up_to: int = EXACT_UP_TO,
                   resamples: int = BOOTSTRAP, confidence: float = CONFIDENCE) -> PairedComparison:
    """a and b: one value per query, in the same query order."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired values differ in length: {len(a)} and {len(b)}")
    diffs = a - b
    t, p = paired_t_test(a, b)
    p_rand, drawn = randomisation_test(a, b, permutations, seed, exact_up_to)
    low, high = bootstrap_ci(a, b, resamples, confidence, seed)
    n = len(a)
    return PairedComparison(
        queries=n, mean_a=float(a.mean()) if n else math.nan, mean_b=float(b.mean()) if n else math.nan,
        difference=float(diffs.mean()) if n else math.nan,
        wins=int(np.sum(diffs > TIE)), losses=int(np.sum(diffs < -TIE)), ties=int(np.sum(np.abs(diffs) <= TIE)),
        t_statistic=t, t_test_p=p, randomisation_p=p_rand, permutations=drawn, ci_low=low, ci_high=high,
        confidence=confidence,
    )
