"""The adaptive switch rule and the navigator's reliability: what a user turns on with
``methods.garen.switch_rule``, on the tiny index with simulated reranker and navigator; and the navigator labels
``garen-train mine --labels reranker`` reads from a traversal, worked by hand."""

from __future__ import annotations

import json

import pytest

from garen_infer.configuration.presets import load_preset, run_config_from
from garen_infer.data.dataset import Query
from garen_infer.llm.cache import NoCache
from garen_infer.running.session import execute
from garen_train.mining.pairs import reranker_group_pairs

ORACLE = {"reranker": {"backend": "oracle", "sigma": 0.3, "seed": 7},
          "navigator": {"backend": "oracle", "sigma": 0.3, "seed": 7}}


def garen_run(dataset, index, out, **options):
    preset = load_preset("cpu-default")
    preset["models"] = ORACLE
    preset.setdefault("methods", {}).setdefault("garen", {}).update(options)
    return execute(dataset, index, run_config_from(preset, "garen", 8), out, cache=NoCache(), log=lambda *_: None)


@pytest.mark.parametrize("rule", ["adaptive", "adaptive-scores"])
def test_an_adaptive_rule_ranks_every_query_and_records_the_navigators_reliability(
    rule, tiny_dataset, full_index, tmp_path
):
    metrics = garen_run(tiny_dataset, full_index, tmp_path / rule, switch_rule=rule)
    records = [json.loads(line) for line in (tmp_path / rule / "trace.jsonl").read_text().splitlines()]
    assert metrics["queries"] == len(records) > 0 and all(r["ranking"] for r in records)
    assert "navigator_reliability" in metrics


def test_the_fixed_rule_is_the_default_and_ranks_as_the_paper_does(tiny_dataset, full_index, tmp_path):
    garen_run(tiny_dataset, full_index, tmp_path / "default")
    garen_run(tiny_dataset, full_index, tmp_path / "fixed", switch_rule="fixed")
    assert (tmp_path / "default" / "run.trec").read_bytes() == (tmp_path / "fixed" / "run.trec").read_bytes()


def test_the_summary_free_navigator_runs_without_a_model_for_the_navigator(tiny_dataset, full_index, tmp_path):
    metrics = garen_run(tiny_dataset, full_index, tmp_path / "best", navigator="best-member")
    assert metrics["queries"] > 0


def test_the_mixed_navigator_averages_the_model_and_the_best_member(tiny_dataset, full_index, tmp_path):
    """model+best-member scores each group (model score + (1 + best member cosine) / 2) / 2: it asks the navigator
    what the model navigator asks, and needs the index's embeddings for the cosines."""
    from garen_infer.methods.garen import Garen, GarenConfig

    assert "embeddings" in Garen.stages_for(GarenConfig(navigator="model+best-member"))
    assert Garen.roles_for(GarenConfig(navigator="model+best-member")) == Garen.roles_for(GarenConfig())
    small = {"window": 4, "keep": 2, "k_groups": 2}  # a window smaller than the budget: GAREN iterates
    records = {}
    for name in ("model", "model+best-member"):
        garen_run(tiny_dataset, full_index, tmp_path / name, navigator=name, **small)
        records[name] = [json.loads(line) for line in (tmp_path / name / "trace.jsonl").read_text().splitlines()]
    navigator_calls = {name: [r["ledger"]["roles"]["navigator"]["requests"] for r in rows]
                       for name, rows in records.items()}
    assert sum(navigator_calls["model"]) > 0 and navigator_calls["model+best-member"] == navigator_calls["model"]
    assert all(r["trace"]["iterations"] for r in records["model+best-member"])


def test_reranker_labels_by_hand():
    """Groups 0 and 1 were scored; 0's member reached the top 1 of the final ranking, 1's member was judged and
    fell; group 2 was scored but none of its members was judged, so it gets no label."""
    query = Query("q", "text")
    iterations = [{"t": 1, "scored": [0, 1, 2]}]
    doc_groups = [(0,), (1,), (2,)]
    pairs = reranker_group_pairs(query, iterations, ranking=[0, 1], top=1, doc_groups=doc_groups, texts=["a", "b", "c"])
    assert [(p["item"], p["label"]) for p in pairs] == [("0", 1), ("1", 0)]


def test_interleave_gives_the_navigator_every_other_place_and_places_each_group_once():
    from garen_infer.methods.garen_adaptive import interleave

    assert interleave([1, 2, 3, 4], [3, 5, 1, 6]) == [1, 3, 2, 5, 4, 6]
    assert interleave([1, 2, 3, 4, 7], [3, 5, 1, 6], per_first=2) == [1, 3, 5, 2, 6, 4, 7]
    assert interleave([], [1, 2]) == [1, 2] and interleave([1], []) == [1]


def test_top_auc_by_hand():
    """Groups 0..3, one document each. The window reranked [2, 0, 3, 1]: with TOP = 3 the groups 2, 0 and 3 hold
    a top document and group 1 does not; the navigator scores 1 above 0 and 3 but below 2, so of the 3 pairs
    (top group, other) it wins 1 and loses 2: AUC 1/3, and the reliability it gives is max(0, 2/3 - 1) = 0."""
    from garen_infer.methods.garen_adaptive import GroupEvidence, shrunk_reliability

    evidence = GroupEvidence([(0,), (1,), (2,), (3,)])
    evidence.observe([2, 0, 3, 1])
    reliability = evidence.reliability({0: 0.2, 1: 0.5, 2: 0.9, 3: 0.1})
    assert (reliability["auc"], reliability["auc_pairs"]) == (round(1 / 3, 4), 3)
    assert shrunk_reliability(reliability, "auc") == 0.0
    agreeing = evidence.reliability({0: 0.8, 1: 0.1, 2: 0.9, 3: 0.7})
    assert agreeing["auc"] == 1.0 and shrunk_reliability(agreeing, "auc") == pytest.approx(3 / (3 + 5))


@pytest.mark.parametrize("merge", ["interleave", "interleave-2"])
def test_an_interleaved_rule_ranks_every_query(merge, tiny_dataset, full_index, tmp_path):
    metrics = garen_run(tiny_dataset, full_index, tmp_path / merge, switch_rule="adaptive", adaptive_merge=merge,
                        adaptive_reliability="auc")
    assert metrics["queries"] > 0 and "navigator_reliability" in metrics
