"""The adaptive rule's arithmetic by hand (methods/garen_adaptive.py): Spearman's rho with tied scores, the
percentile prior, the reliability shrunk by the evidence behind it, and when exploitation starts."""

from __future__ import annotations

import pytest
from scipy.stats import spearmanr

from garen_infer.methods import garen_adaptive as adaptive


def test_spearman_with_ties_is_scipys():
    navigator, evidence = [0.9, 0.5, 0.5, 0.1, 0.3], [1.0, 0.5, 0.25, 0.25, 0.2]
    assert adaptive.spearman(navigator, evidence) == pytest.approx(spearmanr(navigator, evidence).statistic)
    assert adaptive.spearman([1, 1, 1], [1, 2, 3]) is None  # a constant side says nothing


def test_percentiles_put_the_best_at_one_and_share_ties():
    assert adaptive.percentiles({7: 0.2, 8: 0.9, 9: 0.2}) == {7: 0.25, 8: 1.0, 9: 0.25}


def test_the_reliability_is_believed_as_far_as_the_groups_behind_it():
    assert adaptive.shrunk_reliability({"rho": 0.8, "groups": 5}) == pytest.approx(0.4)  # M0 = 5: half of it
    assert adaptive.shrunk_reliability({"rho": -0.5, "groups": 50}) == 0.0  # a contradicting navigator: none
    assert adaptive.shrunk_reliability({"rho": None, "groups": 2}) == 0.0


def test_exploitation_starts_after_tau_or_once_the_best_group_holds_a_top_document():
    evidence = adaptive.GroupEvidence([(0,), (1,), (2,), (3,), (4,)])  # document d in group d
    evidence.observe([2, 0, 1, 3, 4])  # the top 3 (TOP): documents 2, 0 and 1
    assert not adaptive.exploit_now(1, 4, 2, evidence)  # never before the first reranking has been read
    assert adaptive.exploit_now(2, 4, 2, evidence) and not adaptive.exploit_now(2, 4, 3, evidence)
    assert adaptive.exploit_now(5, 4, None, evidence)
