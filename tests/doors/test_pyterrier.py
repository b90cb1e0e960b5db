"""PyTerrier integration: each method as a pt.Transformer (retriever-style and reranking-style) whose pt.Experiment
numbers equal ``garen-infer eval``'s, and the index's k-NN graph read by pyterrier_adaptive as its corpus graph."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyterrier as pt
import pytest
from pyterrier.measures import R, nDCG

import garen_infer as gi
from garen_infer.doors.cli import main
from garen_infer.doors.pyterrier import BM25, GAREN, Method, Rerank, SlideGAR

BUDGET = 8


@pytest.fixture(scope="module")
def index(full_index, tiny_dataset):
    return gi.Index.open(full_index.path, tiny_dataset)


def cli_ndcg(method: str, beir_dir, index_path, out, capsys) -> dict:
    assert main(["run", "--dataset", str(beir_dir), "--index", str(index_path), "--method", method,
                 "--budget", str(BUDGET),
                 "--out", str(out), "--no-cache"]) == 0
    capsys.readouterr()
    assert main(["eval", "--dataset", str(beir_dir), "--run", str(out / "run.trec"), "--measures", "nDCG@10",
                 "R@100"]) == 0
    return json.loads(capsys.readouterr().out)


def test_experiment_equals_garen_infer_eval(index, beir_dir, tmp_path, capsys):
    bm25 = BM25(index)
    systems = {
        "bm25": bm25,
        "rerank": bm25 >> Rerank(index, budget=BUDGET, cache=False),
        "slidegar": bm25 >> SlideGAR(index, budget=BUDGET, cache=False),
        "garen": bm25 >> GAREN(index, budget=BUDGET, cache=False),
        "garen-from-queries": GAREN(index, budget=BUDGET, cache=False),  # retriever-style: its own first stage
    }
    table = pt.Experiment(list(systems.values()), index.topics(), index.qrels(), eval_metrics=[nDCG @ 10, R @ 100],
                          names=list(systems)).set_index("name")
    for name in systems:
        method = name.removesuffix("-from-queries")
        expected = cli_ndcg(method, beir_dir, index.path, tmp_path / name, capsys)
        assert table.loc[name, "nDCG@10"] == pytest.approx(expected["nDCG@10"], abs=1e-12), name
        assert table.loc[name, "R@100"] == pytest.approx(expected["R@100"], abs=1e-12), name
    assert table.loc["garen", "nDCG@10"] != table.loc["bm25", "nDCG@10"]  # the reranking stages did something


def test_experiment_over_some_topics_equals_eval_judged_in_run(index, beir_dir, tmp_path, capsys):
    """pt.Experiment averages over the topics it is given; eval's default averages over every judged query (the
    others scoring 0), so a run of the first two topics equals eval --judged-in-run, and not eval's default."""
    table = pt.Experiment([BM25(index)], index.topics().head(2), index.qrels(), eval_metrics=[nDCG @ 10],
                          names=["bm25"])
    out = tmp_path / "bm25"
    assert main(["run", "--dataset", str(beir_dir), "--index", str(index.path), "--method", "bm25", "--limit",
                 "2", "--out", str(out)]) == 0
    scores = {}
    for flags in ([], ["--judged-in-run"]):
        capsys.readouterr()
        assert main(["eval", "--dataset", str(beir_dir), "--run", str(out / "run.trec"), "--measures",
                     "nDCG@10", *flags]) == 0
        scores[tuple(flags)] = json.loads(capsys.readouterr().out)["nDCG@10"]
    assert table.loc[0, "nDCG@10"] == pytest.approx(scores[("--judged-in-run",)], abs=1e-12)
    assert scores[()] == pytest.approx(scores[("--judged-in-run",)] * 2 / 4)  # the two judged queries not run score 0


def test_results_carry_bm25s_scores_and_the_reranker_s(index, full_index, tiny_dataset):
    """BM25's result frame holds the index's bm25s scores (at float32, trec_eval's precision; a tie lowered to
    the next float32 below); a reranking stage, the embedding reranker's cosines, not n - rank."""
    texts = {q.id: q.text for q in tiny_dataset.queries}
    row_of = {d: r for r, d in enumerate(tiny_dataset.doc_ids)}
    bm25 = BM25(index)
    for qid, group in bm25.transform(index.topics()).groupby("qid", sort=False):
        own = np.float32([full_index.bm25.scores(texts[qid])[row_of[d]] for d in group.docno])
        written = np.float32(list(group.score))
        assert (written <= own).all() and (written == own).any() and (np.diff(written) < 0).all()
    vectors = np.asarray(full_index.embeddings, dtype=np.float32)
    reranked = (bm25 >> Rerank(index, budget=BUDGET, cache=False)).transform(index.topics())
    for qid, group in reranked.groupby("qid"):
        cosines = vectors @ full_index.embedder.query_vectors([texts[qid]])[0]
        assert list(group.score) == pytest.approx([float(cosines[row_of[d]]) for d in group.docno], abs=1e-5)


def test_a_first_stage_from_elsewhere_is_the_one_used(index):
    given = pd.DataFrame({"qid": "q1", "query": "why do volcanoes erupt lava and ash",
                          "docno": ["py4", "pho2", "vol3", "py1"],
                          "score": [4.0, 3.0, 2.0, 1.0], "rank": [0, 1, 2, 3]})
    topics = given[["qid", "query"]].drop_duplicates()
    kept = (pt.Transformer.from_df(given) >> BM25(index))(topics)
    assert list(kept.docno) == ["py4", "pho2", "vol3", "py1"] and list(kept["rank"]) == [0, 1, 2, 3]
    reranked = (pt.Transformer.from_df(given) >> Rerank(index, budget=4, cache=False))(topics)
    # the volcano first
    assert set(reranked.docno) == {"py4", "pho2", "vol3", "py1"} and reranked.docno.iloc[0] == "vol3"
    assert list(reranked.columns) == ["qid", "query", "docno", "score", "rank"]


def test_bm25_fed_a_result_frame_returns_its_order_with_its_scores(index):
    """The frame's scores go with its order (a tie lowered to the next float32 below); a frame without scores
    gets n - rank."""
    given = pd.DataFrame({"qid": "q1", "query": "why do volcanoes erupt lava and ash",
                          "docno": ["py4", "pho2", "vol3", "py1"], "score": [7.5, 2.25, 2.25, -1.0],
                          "rank": [0, 1, 2, 3]})
    topics = given[["qid", "query"]].drop_duplicates()
    kept = (pt.Transformer.from_df(given) >> BM25(index))(topics)
    lowered = float(str(np.nextafter(np.float32(2.25), np.float32(-np.inf))))  # as run.trec writes it
    assert list(kept.docno) == ["py4", "pho2", "vol3", "py1"]
    assert list(kept.score) == [7.5, 2.25, lowered, -1.0]
    ranked_only = (pt.Transformer.from_df(given.drop(columns="score")) >> BM25(index))(topics)
    assert list(ranked_only.docno) == list(kept.docno) and list(ranked_only.score) == [4.0, 3.0, 2.0, 1.0]


def test_transformers_follow_pyterrier_conventions(index):
    garen = GAREN(index, budget=BUDGET, cache=False)
    assert pt.inspect.transformer_outputs(garen, ["qid", "query"]) == ["qid", "query", "docno", "score", "rank"]
    assert pt.inspect.transformer_outputs(garen, ["qid", "query", "docno", "score", "rank"]) == [
        "qid",
        "query",
        "docno",
        "score",
        "rank",
    ]
    assert list(garen(pd.DataFrame(columns=["qid", "query"])).columns) == ["qid", "query", "docno", "score", "rank"]
    with pytest.raises(pt.validate.InputValidationError):
        garen(pd.DataFrame({"qid": ["q1"], "text": ["no query column"]}))
    out = garen.search("python dictionary key lookup", qid="mine")
    assert set(out.qid) == {"mine"} and list(out["rank"]) == list(range(len(out))) and out.score.is_monotonic_decreasing
    assert garen.ledger.loc[0, "qid"] == "mine" and garen.ledger.loc[0, "budget_used"] <= BUDGET
    assert Method(index, "slidegar", budget=4, cache=False).retriever.config.method == "slidegar"
    with pytest.raises(gi.GarenError, match="unknown method"):
        Method(index, "nope")


# ---- the k-NN graph as pyterrier_adaptive's corpus graph ------------------------------------------------------------
def assert_same_neighbours(graph, folder) -> None:
    import pyterrier_adaptive

    assert isinstance(graph, pyterrier_adaptive.NpTopKCorpusGraph)
    ours, doc_ids = folder.knn_graph, folder.doc_ids
    for row, docno in enumerate(doc_ids):
        neighbours, weights = graph.neighbours(docno, weights=True)
        assert list(neighbours) == [doc_ids[n] for n in ours.neighbours[row]]
        assert np.array_equal(np.asarray(weights), ours.weights[row])
        assert list(graph.neighbours(row)) == list(ours.neighbours[row])


def test_pyterrier_adaptive_loads_the_knn_graph(tiny_index):
    assert_same_neighbours(pt.Artifact.load(str(tiny_index.path / "knn_graph")), tiny_index)
