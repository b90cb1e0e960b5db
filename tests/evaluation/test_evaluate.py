"""The measures against numbers worked out by hand, not against other code: a run's metrics.json, ``garen-infer
eval`` and the training metrics all come from ``garen_infer.evaluation.evaluate``, so comparing them with each
other cannot
catch a mistake they share. nDCG is trec_eval's (and so BEIR's and BRIGHT's): gain = the relevance grade,
discount = log2(rank + 1)."""

from __future__ import annotations

import math

import pytest

from garen_infer.data.dataset import Dataset, Document, Query
from garen_infer.evaluation.evaluate import evaluate, per_query

DATASET = Dataset(
    "hand",
    [Document(d, d) for d in ("d1", "d2", "d3", "d4", "d5")],
    [Query("q1", "one"), Query("q2", "two", frozenset({"d4"})), Query("q3", "three"), Query("q4", "four")],
    {
        "q1": {"d1": 2, "d2": 1},
        "q2": {"d5": 1},  # d4 is excluded for q2 (BRIGHT): it must not count even when the run ranks it first
        "q3": {"d3": 1},  # judged, but missing from the run: scores 0 and still counts
        "q4": {"d2": 0},  # judged non-relevant only: no query to average over
    },
)
RUN = {
    "q1": {"d3": 3.0, "d1": 2.0, "d2": 1.0},
    "q2": {"d4": 5.0, "d5": 4.0},
    "q4": {"d2": 1.0},
}
Q1_NDCG = (2 / math.log2(3) + 1 / math.log2(4)) / (2 / math.log2(2) + 1 / math.log2(3))  # d1 at rank 2, d2 at rank 3


def test_ndcg_and_recall_by_hand():
    values = per_query(RUN, DATASET, ("nDCG@10", "R@100"))
    assert values["nDCG@10"] == pytest.approx({"q1": Q1_NDCG, "q2": 1.0, "q3": 0.0})  # q2: d5 is first once d4 goes
    assert values["R@100"] == {"q1": 1.0, "q2": 1.0, "q3": 0.0}
    means = evaluate(RUN, DATASET)
    assert means["queries"] == 3
    assert means["nDCG@10"] == pytest.approx((Q1_NDCG + 1.0 + 0.0) / 3)  # 0.5566; without q3 it would be 0.8348
    assert means["R@100"] == pytest.approx(2 / 3)


def test_the_cutoff_is_at_rank_10_exactly():
    """The documented cut-off: a relevant document at rank 10 counts, at rank 11 it does not."""
    dataset = Dataset("cut", [Document(f"d{i}", "") for i in range(12)], [Query("q", "q")], {"q": {"d9": 1}})
    at_10 = {"q": {f"d{i}": 100.0 - i for i in range(12)}}  # d9 at rank 10
    assert evaluate(at_10, dataset)["nDCG@10"] == pytest.approx(1 / math.log2(11))
    at_11 = {"q": {**at_10["q"], "d10": 91.5}}  # d10 now ranks above d9, which falls to rank 11
    assert evaluate(at_11, dataset)["nDCG@10"] == 0.0
