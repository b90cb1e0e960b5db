"""The reranker's pointwise mode: each document of a window scored by a yes/no scorer, sorted best first (stable
on ties), one Completion per window for the ledger, and no document scored twice for a query."""

from __future__ import annotations

import json

import pytest

from garen_infer.configuration.presets import load_preset
from garen_infer.errors import GarenError
from garen_infer.llm.cache import NoCache, ResponseCache
from garen_infer.llm.pointwise import PointwiseReranker
from garen_infer.llm.roles import (
    EmbeddingYesNoScorer,
    LLMYesNoScorer,
    RerankJob,
    Roles,
    ScoreJob,
    build_roles,
)
from garen_infer.llm.types import Completion
from garen_infer.storage.trec import read_order, read_run

DOCS = [f"doc {i}" for i in range(8)]
SCORES = {"doc 0": 0.1, "doc 1": 0.9, "doc 2": 0.5, "doc 3": 0.5, "doc 4": 0.7, "doc 5": 0.5, "doc 6": 0.0,
          "doc 7": 0.95}


class ScriptedScorer:
    """P(yes) from a table; each scored pair costs its word count in tokens and 0.25 s, and is logged."""

    name = "scripted"

    def __init__(self, cached: bool = False):
        self.calls: list[list[tuple[str, str]]] = []
        self.cached = cached

    def score(self, jobs):
        pairs = [(j.query, j.text) for j in jobs]
        self.calls.append(pairs)
        return [
            Completion(
                score=SCORES[t],
                input_tokens=len(q.split()) + len(t.split()),
                output_tokens=1,
                seconds=0.25,
                cached=self.cached,
            )
            for q, t in pairs
        ]


def test_orders_by_score_and_keeps_window_order_on_ties():
    reranker = PointwiseReranker(ScriptedScorer(), DOCS)
    [(order, completion)] = reranker.rerank([RerankJob("q", (0, 3, 2, 5, 1))])
    assert order == [1, 3, 2, 5, 0]  # 0.9, then the three 0.5s in window order (3, 2, 5), then 0.1
    assert completion.text == "[5] > [2] > [3] > [4] > [1]"
    assert (completion.input_tokens, completion.output_tokens, completion.seconds, completion.cached) == (
        5 * 3,
        5,
        1.25,
        False,
    )


def test_a_document_seen_again_for_the_same_query_is_not_rescored():
    scorer = ScriptedScorer()
    reranker = PointwiseReranker(scorer, DOCS)
    reranker.rerank([RerankJob("q", (0, 1, 2, 3))])
    [(order, completion)] = reranker.rerank([RerankJob("q", (1, 3, 4, 7))])  # a sliding window keeps 1 and 3
    assert scorer.calls[-1] == [("q", "doc 4"), ("q", "doc 7")]
    assert order == [7, 1, 4, 3]
    assert (completion.input_tokens, completion.seconds, completion.cached) == (2 * 3, 0.5, False)
    assert completion.extra == {"scored": 2, "reused": 2}

    [(order, completion)] = reranker.rerank([RerankJob("q", (7, 1, 4))])  # nothing new: a cache hit, free
    assert len(scorer.calls) == 2 and order == [7, 1, 4]
    assert (completion.input_tokens, completion.output_tokens, completion.seconds, completion.cached) == (0, 0, 0, True)

    reranker.rerank([RerankJob("another query", (1, 3))])  # another query: the score depends on it
    assert scorer.calls[-1] == [("another query", "doc 1"), ("another query", "doc 3")]


def test_one_batch_scores_each_pair_once_and_the_first_window_pays():
    scorer = ScriptedScorer()
    reranker = PointwiseReranker(scorer, DOCS)
    (first, a), (second, b), (third, c) = reranker.rerank([RerankJob("q", (0, 1, 2)),
                                                           RerankJob("q", (2, 1, 4)), RerankJob("r", (2,))])
    assert scorer.calls == [[("q", "doc 0"), ("q", "doc 1"), ("q", "doc 2"), ("q", "doc 4"), ("r", "doc 2")]]
    assert (first, second, third) == ([1, 2, 0], [1, 4, 2], [2])
    assert (a.extra, b.extra, c.extra) == ({"scored": 3, "reused": 0}, {"scored": 1, "reused": 2},
                                           {"scored": 1, "reused": 0})


def test_answers_from_the_response_cache_count_as_cache_hits_with_their_tokens():
    reranker = PointwiseReranker(ScriptedScorer(cached=True), DOCS)
    [(_, completion)] = reranker.rerank([RerankJob("q", (0, 1))])
    assert completion.cached and completion.input_tokens == 6


# ---- through the scheduler, the ledger and every method that reranks ------------------------------------------
def run(method, dataset, index, out, models=None, roles=None, budget=8, overrides=()):
    from garen_infer.configuration.presets import run_config_from
    from garen_infer.running.session import execute

    preset = load_preset("cpu-default", list(overrides))
    if models:
        preset["models"].update(models)
    config = run_config_from(preset, method, budget)
    metrics = execute(dataset, index, config, out, roles=roles, cache=NoCache(), log=lambda *_: None)
    return metrics, [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]


def test_the_ledger_counts_windows_as_calls_and_distinct_documents_as_budget(tiny_dataset, tiny_index, tmp_path):
    scorer = ScriptedByText()
    roles = Roles(reranker=PointwiseReranker(scorer, [d.full_text for d in tiny_dataset.documents]))
    # dense first stage: every query reaches 8 documents (BM25 matches only a few here); windows [4,8) [2,6) [0,4)
    overrides = ["first_stage.kind=dense", "methods.rerank.window=4", "methods.rerank.stride=2"]
    _, trace = run("rerank", tiny_dataset, tiny_index, tmp_path / "run", roles=roles, budget=8, overrides=overrides)
    for record in trace:
        ledger, used = record["ledger"]["roles"]["reranker"], record["ledger"]["budget_used"]
        assert used == 8 and ledger["requests"] == 3
        scored = [pair for call in scorer.calls for pair in call if pair[0] == query_text(tiny_dataset, record["qid"])]
        assert len(scored) == len(set(scored)) == used  # each document of the budget scored once, tokens paid once
        assert ledger["input_tokens"] == used and (ledger["model_calls"], ledger["cache_hits"]) == (3, 0)


class ScriptedByText:
    """Scores any corpus text by its length (a deterministic stand-in for a model); one token per pair."""

    name = "by-length"

    def __init__(self):
        self.calls = []

    def score(self, jobs):
        pairs = [(j.query, j.text) for j in jobs]
        self.calls.append(pairs)
        return [Completion(score=len(t) / 1000, input_tokens=1) for _, t in pairs]


def query_text(dataset, qid):
    return next(q.text for q in dataset.queries if q.id == qid)


SMALL_WINDOWS = {  # windows of 4 that overlap by 2, so documents come back in later windows
    "rerank": ["methods.rerank.window=4", "methods.rerank.stride=2"],
    "slidegar": ["methods.slidegar.window=4", "methods.slidegar.step=2"],
    "garen": ["methods.garen.window=4", "methods.garen.keep=2"],
    "rgs": ["methods.rgs.window=4", "methods.rgs.stride=2"],
}


@pytest.mark.parametrize("method", sorted(SMALL_WINDOWS))
def test_every_method_that_reranks_runs_unchanged_with_the_embedding_scorer_as_pointwise_reranker(
    method, tiny_dataset, full_index, tmp_path
):
    """(1 + cos) / 2 sorts a window as the embedding reranker's cosine does, so the runs rank alike; each
    carries its own reranker's scores, (1 + cos) / 2 beside cos."""
    overrides = ["first_stage.kind=dense", *SMALL_WINDOWS[method]]
    listwise, _ = run(method, tiny_dataset, full_index, tmp_path / "listwise", budget=10, overrides=overrides)
    spec = {"mode": "pointwise", "backend": "embedding"}
    roles = build_roles({"reranker": spec, "navigator": {"backend": "embedding"}},
                        [d.full_text for d in tiny_dataset.documents], full_index, NoCache())
    scored = []
    score = roles.reranker.scorer.score
    roles.reranker.scorer.score = lambda jobs: scored.extend((j.query, j.text) for j in jobs) or score(jobs)
    pointwise, trace = run(method, tiny_dataset, full_index, tmp_path / "pointwise", budget=10,
                           overrides=overrides, models={"reranker": spec}, roles=roles)
    assert listwise["mean_requests"] > 3  # several overlapping windows per query
    assert read_order(tmp_path / "pointwise" / "run.trec") == read_order(tmp_path / "listwise" / "run.trec")
    cosines = read_run(tmp_path / "listwise" / "run.trec")
    for qid, docs in read_run(tmp_path / "pointwise" / "run.trec").items():
        halves = [(1 + cos) / 2 for cos in cosines[qid].values()]
        assert list(docs.values()) == pytest.approx(halves, abs=1e-6)
    assert pointwise["scores"] == listwise["scores"] == "reranker"
    assert pointwise["mean_budget_used"] == listwise["mean_budget_used"] and pointwise["nDCG@10"] == listwise["nDCG@10"]
    saved = json.loads((tmp_path / "pointwise" / "config.json").read_text())
    assert saved["models"]["reranker"] == {"mode": "pointwise", "backend": "embedding"}
    assert len(scored) == len(set(scored))  # a document seen again in a later window was not scored again
    for record in trace:
        assert sum(q == query_text(tiny_dataset, record["qid"]) for q, _ in scored) == record["ledger"]["budget_used"]


def test_an_llm_yes_no_model_reranks_through_the_response_cache(tiny_dataset, tiny_index, tiny_model_dir, tmp_path):
    spec = {"mode": "pointwise", "backend": "transformers", "model": str(tiny_model_dir), "device": "cpu"}
    texts = [d.full_text for d in tiny_dataset.documents]
    roles = build_roles({"reranker": spec}, texts, tiny_index, ResponseCache(tmp_path / "cache.sqlite"))
    assert isinstance(roles.reranker, PointwiseReranker) and isinstance(roles.reranker.scorer, LLMYesNoScorer)

    [(order, completion)] = roles.reranker.rerank([RerankJob("volcano ash", (0, 1, 2, 3, 4))])
    direct = roles.reranker.scorer.score([ScoreJob("volcano ash", texts[r]) for r in range(5)])
    assert order == sorted(range(5), key=lambda r: -direct[r].score)
    assert not completion.cached and completion.input_tokens == sum(c.input_tokens for c in direct) > 0

    # a fresh run (a new reranker, the same cache file) makes no model call: every pair is a cache hit
    again = build_roles({"reranker": spec}, texts, tiny_index, ResponseCache(tmp_path / "cache.sqlite")).reranker
    [(same, completion)] = again.rerank([RerankJob("volcano ash", (0, 1, 2, 3, 4))])
    assert same == order and completion.cached


def test_cut_prompts_are_counted_in_the_ledger_and_metrics_and_reported_once(
    tiny_dataset, tiny_index, tiny_model_dir, tmp_path
):
    """A navigator-style yes/no reranker whose max_length is below the prompts' length: each cut request is counted
    in its query's ledger and in metrics.json, and the run says so in one line at the end."""
    spec = {"mode": "pointwise", "backend": "transformers", "model": str(tiny_model_dir), "device": "cpu",
            "max_length": 140}
    roles = build_roles({"reranker": spec}, [d.full_text for d in tiny_dataset.documents], tiny_index, NoCache())
    lines: list[str] = []
    from garen_infer.doors.cli import run_config_from
    from garen_infer.running.session import execute

    config = run_config_from(load_preset("cpu-default", []), "rerank", 4)
    metrics = execute(tiny_dataset, tiny_index, config, tmp_path / "run", roles=roles, cache=NoCache(),
                      log=lines.append)
    trace = [json.loads(line) for line in (tmp_path / "run" / "trace.jsonl").read_text().splitlines()]
    per_query = [r["ledger"]["roles"]["reranker"]["truncated_prompts"] for r in trace]
    assert metrics["truncated_prompts"] == sum(per_query) > 0 and metrics["truncated_prompts_by_role"] == {
        "reranker": sum(per_query)
    }
    assert metrics["truncated_tokens"] == sum(r["ledger"]["truncated_tokens"] for r in trace) > 0
    reports = [line for line in lines if "prompts cut to fit" in line]
    assert len(reports) == 1 and reports[0].startswith("[run] prompts cut to fit a model's limit: "
                                                       f"{metrics['truncated_prompts']} (reranker")


def test_the_embedding_scorer_reads_corpus_vectors_from_the_index(tiny_dataset, tiny_index):
    texts = [d.full_text for d in tiny_dataset.documents]
    seeded = EmbeddingYesNoScorer(tiny_index.embedder, texts, tiny_index.embeddings)
    encoded = EmbeddingYesNoScorer(tiny_index.embedder)
    pairs = [ScoreJob("lava", texts[1]), ScoreJob("lava", "a text outside the corpus")]
    for a, b in zip(seeded.score(pairs), encoded.score(pairs)):
        assert a.score == pytest.approx(b.score, abs=1e-5)


@pytest.mark.parametrize("models, message", [
    ({"reranker": {"mode": "pairwise"}}, "models.reranker.mode 'pairwise' is not one of listwise, pointwise"),
    ({"navigator": {"mode": "pointwise"}}, "models.navigator.mode: only the reranker has a mode"),
])
def test_a_wrong_mode_is_one_clear_error(models, message, tiny_index):
    with pytest.raises(GarenError, match=message):
        build_roles(models, [], tiny_index, NoCache())


def test_a_windows_answer_carries_the_problems_of_its_documents_scores():
    from garen_infer.llm.pointwise import PointwiseReranker
    from garen_infer.llm.types import Completion, RerankJob

    class NanForB:
        name = "nan-for-b"

        def score(self, jobs):
            return [
                Completion(
                    score=0.0 if j.text == "b" else 0.5, problems=["not_a_number"] if j.text == "b" else []
                )
                for j in jobs
            ]

    [(order, completion)] = PointwiseReranker(NanForB(), ["a", "b", "c"]).rerank([RerankJob("q", (0, 1, 2))])
    assert order == [0, 2, 1] and completion.problems == ["not_a_number"]
