"""The scores a run writes: BM25's for bm25, the dense inner product for a dense first stage, the reranker's
own for a method whose windows a pointwise reranker orders, strictly decreasing pseudo-scores for listwise
orders; the same order as the trace's ranking whatever the scores, and the same measures as that order
gives."""

from __future__ import annotations

import json

import ir_measures
import numpy as np
import pytest
from test_scheduler_equality import ORACLE

from garen_infer.configuration.presets import load_preset, run_config_from
from garen_infer.evaluation.evaluate import remove_excluded
from garen_infer.llm.cache import NoCache
from garen_infer.llm.pointwise import PointwiseReranker
from garen_infer.llm.roles import Roles
from garen_infer.llm.types import Completion
from garen_infer.running.session import execute
from garen_infer.storage.trec import read_run, run_scores


def run(method, dataset, index, out, budget=8, overrides=(), models=None, roles=None):
    preset = load_preset("cpu-default", list(overrides))
    if models:
        preset["models"].update(models)
    metrics = execute(
        dataset,
        index,
        run_config_from(preset, method, budget),
        out,
        roles=roles,
        cache=NoCache(),
        log=lambda *_: None,
    )
    trace = {r["qid"]: r for r in map(json.loads, (out / "trace.jsonl").read_text().splitlines())}
    return metrics, trace, read_run(out / "run.trec")


def kept_ranking(record, dataset) -> list[str]:
    """The trace's ranking with the query's excluded ids removed, as run.trec lists it."""
    return list(
        remove_excluded({record["qid"]: dict.fromkeys(record["ranking"], 0.0)}, dataset)[record["qid"]]
    )


def assert_same_order(trace, written, dataset):
    for qid, record in trace.items():
        assert list(written.get(qid, {})) == kept_ranking(record, dataset), qid
        scores = list(written.get(qid, {}).values())
        as_read = np.float32(scores)  # as trec_eval reads them
        assert all(a > b for a, b in zip(as_read, as_read[1:])), qid


def own_scores_kept(written: dict[str, float], own: dict[str, float]) -> int:
    """How many written scores are the document's own, at float32 (trec_eval's precision); each one that is
    not must lie below its own (lowered to keep the order)."""
    same = 0
    for doc, score in written.items():
        if np.float32(score) == np.float32(own[doc]):
            same += 1
        else:
            assert np.float32(score) < np.float32(own[doc]), doc
    return same


def test_bm25_writes_the_bm25s_scores_of_the_index(tiny_dataset, tiny_index, tmp_path):
    metrics, trace, written = run("bm25", tiny_dataset, tiny_index, tmp_path / "run")
    assert metrics["scores"] == "bm25"
    assert_same_order(trace, written, tiny_dataset)
    kept = lowered = 0
    for query in tiny_dataset.judged_queries():
        bm25s = tiny_index.bm25.scores(query.text)
        own = {tiny_dataset.doc_ids[row]: float(bm25s[row]) for row in range(len(bm25s))}
        kept += own_scores_kept(written[query.id], own)
        lowered += run_scores([own[d] for d in written[query.id]])[1]
    assert (
        kept > 0
        and kept + lowered == sum(map(len, written.values()))
        and metrics["scores_lowered"] == lowered
    )


def test_a_dense_first_stage_writes_its_inner_products(tiny_dataset, tiny_index, tmp_path):
    metrics, trace, written = run(
        "bm25", tiny_dataset, tiny_index, tmp_path / "run", overrides=["first_stage.kind=dense"]
    )
    assert metrics["scores"] == "dense"
    assert_same_order(trace, written, tiny_dataset)
    vectors = np.asarray(tiny_index.embeddings, dtype=np.float32)
    for query in tiny_dataset.judged_queries():
        sims = vectors @ tiny_index.embedder.query_vectors([query.text])[0]
        own = {tiny_dataset.doc_ids[row]: float(sims[row]) for row in range(len(sims))}
        assert list(written[query.id].values()) == pytest.approx(
            [own[d] for d in written[query.id]], abs=1e-5
        )


class TiedScorer:
    """P(yes) by a table over the corpus texts, with a tie the window order must break: py1, py3 and vol2
    share 0.5 (scored in any order, they must keep the first stage's)."""

    name = "tied"

    def __init__(self, dataset):
        self.by_text = {d.full_text: round(0.05 + 0.07 * i, 2) for i, d in enumerate(dataset.documents)}
        for doc in dataset.documents:
            if doc.id in ("py1", "py3", "vol2"):
                self.by_text[doc.full_text] = 0.5

    def score(self, jobs):
        return [Completion(score=self.by_text[job.text], input_tokens=1) for job in jobs]


@pytest.mark.parametrize("method", ["rerank", "slidegar", "garen", "rgs"])
def test_a_pointwise_reranker_s_scores_are_what_a_method_that_reranks_writes(
    method, tiny_dataset, full_index, tmp_path
):
    scorer = TiedScorer(tiny_dataset)
    own = {d.id: scorer.by_text[d.full_text] for d in tiny_dataset.documents}
    roles = Roles(
        reranker=PointwiseReranker(scorer, [d.full_text for d in tiny_dataset.documents]),
        scorers={"navigator": scorer},
    )
    overrides = ["first_stage.kind=dense"]
    metrics, trace, written = run(
        method,
        tiny_dataset,
        full_index,
        tmp_path / "run",
        overrides=overrides,
        models={"reranker": {"mode": "pointwise", "backend": "embedding"}},
        roles=roles,
    )
    assert metrics["scores"] == "reranker"
    assert_same_order(trace, written, tiny_dataset)
    lowered = 0
    for qid, record in trace.items():
        recorded = dict(zip(record["ranking"], record["scores"]))
        assert all(recorded[d] == own[d] for d in record["ranking"] if recorded[d] is not None)
        assert sum(s is not None for s in record["scores"]) >= min(len(record["ranking"]), 2), qid
        expected, n = run_scores([recorded[d] for d in written[qid]])
        assert list(written[qid].values()) == expected
        lowered += n
    assert sum(own_scores_kept(docs, own) for docs in written.values()) > 0
    assert metrics["scores_lowered"] == lowered


def test_a_tie_of_the_reranker_is_lowered_and_keeps_the_window_order(tiny_dataset, tiny_index, tmp_path):
    """Every document scores 0.5: the order is the first stage's (stable sort), each line a float32 below the
    last."""
    scorer = TiedScorer(tiny_dataset)
    scorer.by_text = dict.fromkeys(scorer.by_text, 0.5)
    roles = Roles(reranker=PointwiseReranker(scorer, [d.full_text for d in tiny_dataset.documents]))
    metrics, trace, written = run(
        "rerank",
        tiny_dataset,
        tiny_index,
        tmp_path / "run",
        overrides=["first_stage.kind=dense"],
        roles=roles,
    )
    _, _, first = run(
        "bm25", tiny_dataset, tiny_index, tmp_path / "first", overrides=["first_stage.kind=dense"]
    )
    for qid, docs in written.items():
        assert list(docs) == list(first[qid])[: len(docs)]
        assert list(docs.values()) == run_scores([0.5] * len(docs))[0] and list(docs.values())[0] == 0.5
    assert metrics["scores_lowered"] == sum(len(docs) - 1 for docs in written.values())


@pytest.mark.parametrize("method", ["rerank", "slidegar", "lattice"])
def test_a_listwise_order_carries_n_minus_rank(method, tiny_dataset, full_index, tmp_path):
    metrics, trace, written = run(method, tiny_dataset, full_index, tmp_path / "run", models=ORACLE)
    assert metrics["scores"] == "pseudo" and metrics["scores_lowered"] == 0
    assert_same_order(trace, written, tiny_dataset)
    for docs in written.values():
        assert list(docs.values()) == [float(len(docs) - rank) for rank in range(len(docs))]


def test_a_reranked_head_sits_above_a_pseudo_scored_tail(tiny_dataset, full_index, tmp_path):
    """RGS with backfill: the documents it reranked carry the reranker's scores, the first-stage documents it
    appends without reranking one below each other, under the head's last."""
    scorer = TiedScorer(tiny_dataset)
    own = {d.id: scorer.by_text[d.full_text] for d in tiny_dataset.documents}
    roles = Roles(reranker=PointwiseReranker(scorer, [d.full_text for d in tiny_dataset.documents]))
    overrides = ["first_stage.kind=dense", "methods.rgs.backfill=true", "methods.rgs.first_stage=run"]
    metrics, trace, written = run(
        "rgs", tiny_dataset, full_index, tmp_path / "run", budget=4, overrides=overrides, roles=roles
    )
    assert metrics["scores"] == "reranker"
    assert_same_order(trace, written, tiny_dataset)
    for qid, record in trace.items():
        scored = [s is not None for s in record["scores"]]
        head = scored.index(False)
        assert head >= 1 and not any(scored[head:])  # reranked head, then the backfilled tail
        scores = list(written[qid].values())
        assert own_scores_kept(dict(list(written[qid].items())[:head]), own) >= 1
        assert scores[head:] == pytest.approx(
            [scores[head - 1] - k for k in range(1, len(scores) - head + 1)], abs=1e-6
        )


def test_measures_on_run_trec_equal_the_ranking_order_s(tiny_dataset, full_index, tmp_path):
    """ir_measures (pytrec_eval, trec_eval's code) on run.trec, with its ties lowered, gives what the trace's
    order gives with n - rank scores, and what metrics.json says."""
    scorer = TiedScorer(tiny_dataset)
    roles = Roles(reranker=PointwiseReranker(scorer, [d.full_text for d in tiny_dataset.documents]))
    metrics, trace, written = run(
        "rerank",
        tiny_dataset,
        full_index,
        tmp_path / "run",
        overrides=["first_stage.kind=dense"],
        roles=roles,
    )
    assert metrics["scores_lowered"] > 0
    order = {
        qid: {d: float(100 - r) for r, d in enumerate(kept_ranking(record, tiny_dataset))}
        for qid, record in trace.items()
    }
    qrels = {qid: docs for qid, docs in tiny_dataset.qrels.items()}
    measures = [ir_measures.parse_measure(m) for m in ("nDCG@10", "R@100", "RR", "AP")]
    on_file = ir_measures.calc_aggregate(measures, qrels, written)
    assert on_file == ir_measures.calc_aggregate(measures, qrels, order)
    assert metrics["nDCG@10"] == pytest.approx(on_file[measures[0]])


def test_a_folder_whose_trace_predates_scores_resumes_with_pseudo_scores_for_its_queries(
    tiny_dataset, tiny_index, tmp_path
):
    """Queries finished before runs kept their scores have only their order: they carry n - rank, the queries
    answered now their BM25 scores, and metrics.json names both kinds."""
    out = tmp_path / "run"
    run("bm25", tiny_dataset, tiny_index, out)
    records = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    old = [{k: v for k, v in r.items() if k not in ("scores", "score_kind")} for r in records[:2]]
    (out / "trace.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
    metrics, trace, written = run("bm25", tiny_dataset, tiny_index, out)
    assert metrics["scores"] == "bm25+pseudo"
    assert_same_order(trace, written, tiny_dataset)
    for record in old:
        docs = written[record["qid"]]
        assert list(docs.values()) == [float(len(docs) - rank) for rank in range(len(docs))]
    for record in records[2:]:
        assert list(written[record["qid"]].values()) == run_scores(record["scores"])[0]
