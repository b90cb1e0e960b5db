"""The paired tests behind the report's significance marks, against known values: scipy's paired t-test on the same
numbers, and the randomisation test against hand-worked and exhaustively enumerated p-values."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import ttest_rel

from garen_infer.report.significance import compare_paired, paired_t_test, randomisation_test


def test_t_test_is_scipys_paired_t_test():
    rng = np.random.default_rng(7)
    a = rng.uniform(0, 1, 40)
    b = np.clip(a - 0.05 + rng.normal(0, 0.1, 40), 0, 1)
    t, p = paired_t_test(a, b)
    expected = ttest_rel(a, b)
    assert t == pytest.approx(expected.statistic, rel=1e-12) and p == pytest.approx(expected.pvalue, rel=1e-12)
    # a textbook case: differences 1, 2, 3, 4, 5 -> t = 3 / sqrt(2.5 / 5) = 4.2426, 4 degrees of freedom
    t, p = paired_t_test([2, 4, 6, 8, 10], [1, 2, 3, 4, 5])
    assert t == pytest.approx(3 / np.sqrt(0.5)) and p == pytest.approx(
        ttest_rel([2, 4, 6, 8, 10], [1, 2, 3, 4, 5]).pvalue
    )


def test_identical_runs_are_not_different():
    assert paired_t_test([0.5, 0.2, 0.9], [0.5, 0.2, 0.9]) == (0.0, 1.0)  # scipy says nan (zero variance)
    assert randomisation_test([0.5, 0.2, 0.9], [0.5, 0.2, 0.9]) == (1.0, 0)


def test_randomisation_by_hand():
    # differences 1, 2, 3: of the 8 sign patterns only +++ and --- reach |mean| >= 2, so p = 2/8
    assert randomisation_test([1, 2, 3], [0, 0, 0]) == (0.25, 0)
    # differences 1, -1: every pattern has |mean| 0 or 1 >= 0 -> p = 1
    assert randomisation_test([1, 0], [0, 1]) == (1.0, 0)
    # differences 3, 1, 1, 1: |sum| >= 6 for ++++ / ---- (6) only; +-++ etc give 4, 2 -> p = 2/16
    assert randomisation_test([3, 1, 1, 1], [0, 0, 0, 0]) == (2 / 16, 0)


def exhaustive_p(diffs) -> float:
    """The exact two-sided sign-flip p-value, enumerated the slow, obvious way."""
    observed = abs(sum(diffs))
    patterns = list(itertools.product((1, -1), repeat=len(diffs)))
    return sum(abs(sum(s * d for s, d in zip(signs, diffs))) >= observed - 1e-9 for signs in patterns) / len(patterns)


def test_exact_enumeration_matches_the_obvious_one():
    rng = np.random.default_rng(3)
    a, b = rng.uniform(0, 1, 9), rng.uniform(0, 1, 9)
    p, drawn = randomisation_test(a, b)
    assert drawn == 0 and p == pytest.approx(exhaustive_p(list(a - b)))


def test_sampled_randomisation_is_seeded_and_close_to_exact():
    rng = np.random.default_rng(11)
    a = rng.uniform(0, 1, 12)
    b = a - 0.08 + rng.normal(0, 0.12, 12)
    exact = exhaustive_p(list(a - b))
    p, drawn = randomisation_test(a, b, permutations=20_000, seed=0, exact_up_to=0)  # force sampling
    assert drawn == 20_000
    assert p == randomisation_test(a, b, permutations=20_000, seed=0, exact_up_to=0)[0]  # same seed, same p
    se = np.sqrt(exact * (1 - exact) / 20_000)
    assert abs(p - exact) < 4 * se + 1 / 20_000
    assert p != randomisation_test(a, b, permutations=20_000, seed=1, exact_up_to=0)[0]


def test_wins_losses_ties_and_means():
    c = compare_paired([0.5, 0.7, 0.1, 0.3], [0.4, 0.7, 0.2, 0.3])
    assert (c.queries, c.wins, c.losses, c.ties) == (4, 1, 1, 2)
    assert c.mean_a == pytest.approx(0.4) and c.mean_b == pytest.approx(0.4) and c.difference == pytest.approx(0.0)
    assert c.randomisation_p == 1.0 and c.permutations == 0
    with pytest.raises(ValueError):
        compare_paired([1, 2], [1])
