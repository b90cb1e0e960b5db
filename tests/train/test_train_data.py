"""Mined pairs in, training lists and validation pairs out: only a finished mine is read, the split is by query and
seeded, negatives are redrawn per epoch, and N distributed processes see exactly what one process sees."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import write_tiny_pairs

from garen_infer.errors import GarenError
from garen_train.pairs_data import EpochSampler, MinedPairsDataModule, TrainLists, by_query, read_pairs_file
from garen_train.scorers.losses import iteration_weights, listwise_loss, pointwise_loss, training_loss
from garen_train.scorers.metrics import scorer_metrics


def test_pairs_are_grouped_by_query_in_file_order(tiny_pairs):
    queries = _queries(tiny_pairs / "documents.jsonl")
    assert [q.qid for q in queries][:3] == ["q1-0", "q1-1", "q1-2"]
    first = queries[0]
    assert {p.item for p in first.positives} == {"vol1", "vol2", "vol4"}
    assert (
        len(first.pairs) == 12
        and first.pairs[0].rank == 1
        and first.pairs[0].text.startswith("Volcanic eruptions\n")
    )


def test_only_the_pairs_files_of_a_finished_mine_are_read(tiny_pairs, tmp_path):
    with pytest.raises(GarenError, match="name groups.jsonl or documents.jsonl"):
        _data(tiny_pairs / "manifest.json")
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    (unfinished / "groups.jsonl").write_text((tiny_pairs / "groups.jsonl").read_text())
    with pytest.raises(GarenError, match="not a finished 'garen-train mine' output"):
        _data(unfinished / "groups.jsonl")


def _queries(path):
    return by_query(read_pairs_file(path)[1])


def _data(path, **options) -> MinedPairsDataModule:
    data = MinedPairsDataModule(str(path), **options)
    data.setup("fit")
    return data


def test_split_is_by_query_seeded_and_disjoint(tiny_pairs):
    data = _data(tiny_pairs / "documents.jsonl", val_fraction=0.25, seed=3)
    train, val = {q.qid for q in data.train_queries}, {q.qid for q in data.val_queries}
    assert len(val) == 3 and len(train) == 9 and not train & val
    assert val == {q.qid for q in _data(tiny_pairs / "documents.jsonl", val_fraction=0.25, seed=3).val_queries}
    assert val != {q.qid for q in _data(tiny_pairs / "documents.jsonl", val_fraction=0.25, seed=4).val_queries}


def test_a_separate_validation_folder_must_not_share_queries(tiny_pairs, tmp_path):
    train = write_tiny_pairs(tmp_path / "train", keep=lambda qid: qid.endswith("-0"))
    val = write_tiny_pairs(tmp_path / "val", "evaluation", keep=lambda qid: not qid.endswith("-0"))
    data = _data(train / "documents.jsonl", val_path=str(val / "documents.jsonl"))
    assert len(data.train_queries) == 4 and len(data.val_queries) == 8
    with pytest.raises(GarenError, match="evaluation queries"):  # the mining half's guard, by id
        _data(tiny_pairs / "documents.jsonl", val_path=str(val / "documents.jsonl"))


def test_pairs_mined_for_evaluation_never_train(tmp_path):
    test = write_tiny_pairs(tmp_path / "mined-test", "evaluation")
    with pytest.raises(GarenError, match="never train"):
        _data(test / "groups.jsonl")
    data = MinedPairsDataModule(str(test / "groups.jsonl"), val_fraction=0.0)
    data.setup("validate")  # it may score a model
    assert len(data.train_queries) == 12


def test_each_list_is_a_positive_and_fresh_negatives_per_epoch(tiny_pairs):
    lists = TrainLists(_queries(tiny_pairs / "documents.jsonl"), list_size=4, seed=0)
    assert len(lists) == 3 * (3 + 3 + 1 + 1)  # one list per (query, positive)
    first = lists[(0, 0)]
    assert [p.label for p, _ in first] == [1, 0, 0, 0] and {g for _, g in first} == {0}
    assert lists[(0, 0)] == first  # a pure function of (list, epoch)
    draws = {tuple(p.item for p, _ in lists[(0, epoch)]) for epoch in range(6)}
    assert len(draws) > 1


def test_two_replicas_split_each_batch_of_one(tiny_pairs):
    lists = TrainLists(_queries(tiny_pairs / "documents.jsonl"), list_size=3, seed=0)

    def batches(world: int, rank: int, size: int):
        sampler = EpochSampler(lists, num_replicas=world, rank=rank, shuffle=True, seed=7, drop_last=True)
        sampler.set_epoch(2)
        keys = list(sampler)
        assert all(epoch == 2 for _, epoch in keys)
        return [keys[i : i + size] for i in range(0, len(keys) - size + 1, size)]

    single = batches(1, 0, 4)
    halves = list(zip(batches(2, 0, 2), batches(2, 1, 2)))
    assert len(single) == len(halves)
    for whole, (a, b) in zip(single, halves):
        assert sorted(whole) == sorted(a + b)


def test_listwise_loss_is_softmax_cross_entropy_per_list():
    logits = torch.tensor([2.0, 0.5, -1.0, 0.3, 0.1])
    labels = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0])
    groups = torch.tensor([0, 0, 0, 1, 1])
    first = -torch.log_softmax(logits[:3], 0)[0]
    second = -torch.log_softmax(logits[3:], 0)[1]
    assert listwise_loss(logits, labels, groups).item() == pytest.approx(((first + second) / 2).item())
    both = training_loss("listwise", logits, labels, groups, pointwise_weight=0.5)
    assert both.item() == pytest.approx(
        (listwise_loss(logits, labels, groups) + 0.5 * pointwise_loss(logits, labels)).item()
    )


def test_lists_whose_positive_garen_reaches_late_weigh_more():
    logits = torch.tensor([2.0, 0.5, -1.0, 0.3, 0.1])
    labels = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0])
    groups = torch.tensor([0, 0, 0, 1, 1])
    first = -torch.log_softmax(logits[:3], 0)[0]
    second = -torch.log_softmax(logits[3:], 0)[1]
    # the first list's positive scored at GAREN's iteration 0 (weight 1), the second's never scored (1 + 10)
    weights = iteration_weights(torch.tensor([0, 0, 0, 3, -1]), unreached=10)
    assert weights.tolist() == [1.0, 1.0, 1.0, 4.0, 11.0]
    weighted = training_loss("listwise", logits, labels, groups, weights=weights)
    assert weighted.item() == pytest.approx(((first + 11 * second) / 12).item())
    assert listwise_loss(logits, labels, groups, torch.ones(5)).item() == pytest.approx(
        listwise_loss(logits, labels, groups).item()
    )


def test_a_batch_carries_the_iteration_that_scored_each_group(tiny_pairs):
    from garen_train.pairs_data import collate

    pairs = _queries(tiny_pairs / "groups.jsonl")[0].pairs
    batch = collate([[(p, 0) for p in pairs]])
    assert batch["iterations"].tolist() == [-1 if p.iteration is None else p.iteration for p in pairs]
    assert any(p.iteration is not None for p in pairs)


def test_iteration_weighting_is_checked_when_the_objective_is_read():
    from garen_train.scorers.base import Objective

    assert Objective(positive_weight="iteration").positive_weight == "iteration"
    with pytest.raises(GarenError, match="positive_weight must be one of uniform, iteration, not 'rank'"):
        Objective(positive_weight="rank")
    with pytest.raises(GarenError, match="it needs objective.loss listwise"):
        Objective(loss="pointwise", positive_weight="iteration")


def test_metrics_by_hand():
    # query 0: gold scored 0.9 and 0.2 among negatives 0.5, 0.1 -> AUC 3/4, nDCG by the formula
    # query 1: no gold -> only in the pooled AUC
    queries = np.array([0, 0, 0, 0, 1, 1])
    labels = np.array([1, 0, 1, 0, 0, 0])
    scores = np.array([0.9, 0.5, 0.2, 0.1, 0.3, 0.4])
    ranks = np.array([4, 3, 2, 1, 1, 2])
    out = scorer_metrics(queries, labels, scores, ranks, recall_at=2)
    assert out["auc"] == pytest.approx(0.75)
    assert out["R@2"] == pytest.approx(0.5)
    ideal = 1 + 1 / np.log2(3)
    assert out["nDCG@10"] == pytest.approx((1 + 1 / np.log2(4)) / ideal)
    assert out["first_stage_R@2"] == pytest.approx(0.5)  # first-stage order: d4, d3(gold), ...
    assert out["first_stage_nDCG@10"] == pytest.approx((1 / np.log2(3) + 1 / np.log2(5)) / ideal)
    assert out["queries_with_gold"] == 1 and out["pairs"] == 6


def test_max_negatives_keeps_each_querys_first_negatives(tiny_pairs):
    data = _data(tiny_pairs / "documents.jsonl", max_negatives=2, val_fraction=0.25)
    for query in data.train_queries + data.val_queries:
        assert len(query.negatives) == 2 and query.positives
        ranks = [p.rank for p in query.negatives]
        assert ranks == sorted(ranks) and ranks[0] <= 3


def test_distillation_is_zero_when_the_scorer_ranks_as_the_teacher():
    from garen_train.scorers.losses import distillation_loss

    teacher = torch.tensor([3.0, 1.0, 0.0, 2.0, 2.0])
    groups = torch.tensor([0, 0, 0, 1, 1])
    assert distillation_loss(teacher + 5.0, teacher, groups).item() == pytest.approx(0.0, abs=1e-6)  # shift-invariant
    assert distillation_loss(-teacher, teacher, groups).item() > 0.5


def test_evaluate_scores_any_scorer_on_mined_pairs(tiny_pairs, capsys):
    """`garen-train evaluate`: the CPU default's cosine on every query, then on the held-out ones only."""
    from garen_train.cli import main

    assert main(["evaluate", "--pairs", str(tiny_pairs / "groups.jsonl"), "--model", "{backend: embedding}",
                 "--no-cache"]) == 0
    every = json.loads(capsys.readouterr().out)
    assert every["queries"] == 12 and every["scorer"] == "embedding"
    assert 0.5 < every["metrics"]["auc"] <= 1.0 and every["metrics"]["R@20"] == 1.0  # 3 groups: all within 20
    assert main(["evaluate", "--pairs", str(tiny_pairs / "groups.jsonl"), "--model", "{backend: embedding}",
                 "--no-cache",
                 "--held-out", "--val-fraction", "0.25"]) == 0
    assert json.loads(capsys.readouterr().out)["queries"] == 3


def test_a_batch_size_no_training_list_fills_is_one_line(tiny_pairs):
    """drop_last would drop every batch: fit would run no step and write no checkpoint, yet exit 0."""
    data = _data(tiny_pairs / "documents.jsonl", val_fraction=0.25, list_size=3, batch_size=1000)
    with pytest.raises(GarenError,
                       match=r"documents.jsonl: \d+ training lists make no full batch of data.batch_size=1000; "
                             r"lower data.batch_size or mine more queries"):
        data.train_dataloader()
