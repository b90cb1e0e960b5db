"""run.trec's score column: a ranking's own scores where it has them, lowered by the least step where its
order does not follow them, pseudo-scores below where it has none, and a file that trec_eval's readers
(ir_measures, through pytrec_eval) rank exactly as the ranking is ordered."""

from __future__ import annotations

import math

import ir_measures
import numpy as np
import pytest

from garen_infer.storage.trec import format_run, format_score, read_order, read_run, run_scores, write_run


def below(score: float, steps: int = 1) -> float:
    """The float32 ``steps`` below ``score``, as run.trec writes it."""
    value = np.float32(score)
    for _ in range(steps):
        value = np.nextafter(value, np.float32(-np.inf))
    return float(str(value))


def test_own_scores_that_decrease_are_written_as_they_are():
    assert run_scores([12.5, 7.25, 0.5, -3.0]) == ([12.5, 7.25, 0.5, -3.0], 0)


def test_a_ranking_without_scores_carries_n_minus_rank():
    assert run_scores([None, None, None, None]) == ([4.0, 3.0, 2.0, 1.0], 0)
    assert run_scores([]) == ([], 0)


def test_ties_and_rises_are_lowered_to_just_below_the_score_above():
    scores, lowered = run_scores([0.9, 0.9, 0.95, 0.9, 0.4])
    assert scores == [0.9, below(0.9), below(0.9, 2), below(0.9, 3), 0.4] and lowered == 3
    assert all(a > b for a, b in zip(scores, scores[1:]))


def test_documents_without_a_score_below_a_scored_head_sit_one_below_each_other():
    scores, lowered = run_scores([0.8, 0.3, None, None])
    assert scores == [0.8, 0.3, -0.7, -1.7] and lowered == 0


def test_a_score_that_is_not_a_finite_float32_reads_as_none():
    assert run_scores([0.75, math.nan, math.inf, 1e39])[0] == [0.75, -0.25, -1.25, -2.25]


def test_scores_that_differ_only_past_float32_precision_are_a_tie_for_trec_eval_and_lowered():
    """trec_eval keeps a float per score: 0.1 and 0.1 + 1e-12 are one value to it."""
    scores, lowered = run_scores([0.1, 0.1 - 1e-12, 0.05])
    assert scores == [0.1, below(0.1), 0.05] and lowered == 1
    assert np.float32(scores[0]) > np.float32(scores[1]) > np.float32(scores[2])


def test_a_written_score_reads_back_as_the_same_float():
    for score in (3.0, 0.1, below(0.5), below(0.0), below(12.345678, 7), -2.0, 1e20):
        assert float(format_score(score)) == score
    assert (
        format_score(100.0) == "100"
        and format_score(0.25) == "0.25"
        and format_score(12.345678329467773) == "12.345678"
    )


def test_format_run_refuses_scores_that_do_not_decrease():
    with pytest.raises(ValueError, match="decrease strictly"):
        format_run({"q1": {"a": 1.0, "b": 1.0}}, "tag")


def test_ir_measures_ranks_a_run_with_lowered_ties_in_the_ranking_s_order(tmp_path):
    """Three documents tied on their own score, the relevant one last in our order and first by trec_eval's
    tie break (docno, descending): the tied file would score it at rank 1; the written one keeps it at rank
    3."""
    ranking, own = ["d1", "d2", "d3"], [0.5, 0.5, 0.5]
    qrels = {"q1": {"d3": 1}}
    measures = [ir_measures.parse_measure("nDCG@10"), ir_measures.parse_measure("RR")]
    scores, lowered = run_scores(own)
    write_run(tmp_path / "run.trec", {"q1": dict(zip(ranking, scores))}, "test")
    written = read_run(tmp_path / "run.trec")
    in_order = {"q1": {d: float(len(ranking) - r) for r, d in enumerate(ranking)}}
    tied = {"q1": dict(zip(ranking, own))}
    assert lowered == 2 and read_order(tmp_path / "run.trec") == [
        ("q1", d, r + 1) for r, d in enumerate(ranking)
    ]
    assert ir_measures.calc_aggregate(measures, qrels, written) == ir_measures.calc_aggregate(
        measures, qrels, in_order
    )
    assert ir_measures.calc_aggregate(measures, qrels, tied) != ir_measures.calc_aggregate(
        measures, qrels, in_order
    )
