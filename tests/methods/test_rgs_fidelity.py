"""RGS's paper neighbour filter, the author's listwise prompt and answer rule, the
author's SlideGAR variant and DiskANN's start point."""

from __future__ import annotations

import numpy as np
import pytest
from test_rgs import by_score, drive, make_rgs

# ---- item 5: follow: paper drops only neighbours already in A ---------------------------------------------------
GRAPH = {0: [1, 2, 3], 1: [2, 4]}
SCORES = {0: 5, 1: 9, 2: 1, 3: 8, 4: 7}


def test_paper_mode_reinserts_a_document_cut_by_truncation():
    # A = [0]; expand 0 -> rerank [0, 1, 2, 3] -> [1, 3, 0, 2], cut to L = 2: 0 and 2 fall off. Expand 1: its
    # neighbours are 2 (reranked before, no longer in A) and 4 (new, the last unit of budget).
    options = dict(window=4, stride=2, list_length=2, seeds=1, early_stop=False)
    _, paper_calls, paper_ledger, _ = drive(make_rgs(GRAPH, follow="paper", **options), [0], 5, by_score(SCORES))
    _, code_calls, code_ledger, _ = drive(make_rgs(GRAPH, follow="code", **options), [0], 5, by_score(SCORES))
    assert paper_calls == [(0, 1, 2, 3), (1, 3, 2, 4)]  # 2 comes back at no budget
    assert code_calls == [(0, 1, 2, 3), (1, 3, 4)]  # the code drops everything ever reranked
    assert len(paper_ledger.reranked) == len(code_ledger.reranked) == 5
    _, calls, _, _ = drive(make_rgs(GRAPH, follow="paper", revisit=False, **options), [0], 5, by_score(SCORES))
    assert calls == code_calls  # the switch on its own


# ---- item 6: the author's listwise prompt and "any id missing -> input order" ------------------------------------
def test_rgs_author_prompt_and_instructions_for_every_bright_task():
    from garen_infer.data.bright import TASKS
    from garen_infer.llm.prompts import LISTWISE_PROMPTS
    from garen_infer.llm.rgs_prompt import BRIGHT_SHORT_INSTRUCTIONS, bright_task

    assert set(BRIGHT_SHORT_INSTRUCTIONS) == set(TASKS)
    assert (bright_task("bright/theoremqa_theorems:long"), bright_task("scifact/test")) == ("theoremqa_theorems", "")
    system, user = (m["content"] for m in LISTWISE_PROMPTS["rgs-author"]("q?", ["a [3] b", "c"], None, "paper", "pony"))
    assert system == (
        "You are an expert in pony. Given a Pony question, retrieve relevant passages that help answer the "
        "question. I will provide you with a query and 2 passages, each indicated by number "
        "identifier []. \nRank the passages based on their relevance to query."
    )
    # brackets stripped
    assert user.startswith("Query: q?.\n Passages: [1]  a 3 b\n\n[2]  c\n\n \nRank the 2 passages above")
    assert user.endswith("The output format should be like [1] > [2] ... > [2]. Only response the ranking "
                         "results, do not say any word or explain.")
    with pytest.raises(Exception, match="needs a BRIGHT task"):
        LISTWISE_PROMPTS["rgs-author"]("q", ["a"], None, "paper", "")


def test_rgs_author_answer_rule_keeps_the_input_order_when_an_id_is_missing(tiny_index):
    from garen_infer.llm.cache import NoCache
    from garen_infer.llm.permutation import parse_permutation
    from garen_infer.llm.rgs_prompt import parse_all_or_identity
    from garen_infer.llm.roles import RerankJob, build_roles
    from garen_infer.llm.types import Completion

    assert parse_all_or_identity("[3] > [1] > [2]", 3).order == [2, 0, 1]
    assert parse_all_or_identity("[3] > [1]", 3).order == [0, 1, 2]  # invalid: the window keeps its order
    assert parse_permutation("[3] > [1]", 3) == [2, 0, 1]  # rank_llm appends the missing id instead
    spec = {"reranker": {"backend": "openai", "base_url": "http://127.0.0.1:9", "model": "m", "api_key_env": None,
                         "prompt": "rgs-author", "sampling": {"temperature": 0.0}}}
    reranker = build_roles(spec, ["d0", "d1", "d2"], tiny_index, NoCache(), dataset_name="bright/biology").reranker
    assert (reranker.task, reranker.max_words, reranker.sampling.max_tokens) == ("biology", None, 200)

    class Scripted:
        id = "scripted"

        def generate(self, chats, sampling):
            return [Completion(text="[3] > [1]") for _ in chats]

    reranker.backend = Scripted()
    assert reranker.rerank([RerankJob("q", (0, 1, 2))])[0][0] == [0, 1, 2]


def test_rgs_paper_preset_uses_the_author_prompt_and_variants():
    from garen_infer.configuration.presets import load_preset

    preset = load_preset("rgs-paper")
    assert preset["models"]["reranker"]["prompt"] == "rgs-author"
    assert preset["methods"]["rgs"]["excluded"] == "keep" and preset["methods"]["slidegar"]["variant"] == "rgs-author"


# ---- item 13: the author's SlideGAR and DiskANN's start point ----------------------------------------------------
class FakeKnn:
    def __init__(self, adjacency: dict[int, list[int]], n: int):
        self.adjacency, self.neighbours = adjacency, np.zeros((n, 1))

    def of(self, row):
        return list(self.adjacency.get(row, []))


def test_rgs_author_slidegar_alternates_frontier_and_initial_list():
    from types import SimpleNamespace

    from garen_infer.data.dataset import Query
    from garen_infer.llm.ledger import QueryLedger
    from garen_infer.methods.base import QueryState
    from garen_infer.methods.slidegar import SlideGar, SlideGarConfig

    graph = FakeKnn({0: [10, 11], 1: [12], 2: [13], 3: [14], 13: [2, 16]}, 20)
    scores = {0: 1, 1: 5, 2: 3, 3: 0, 4: 6, 5: 7, 10: 9, 11: 2, 12: 4, 13: 8, 14: 1.5, 16: 0.5}
    method = SlideGar(SlideGarConfig(window=4, step=2, variant="rgs-author"), SimpleNamespace(knn_graph=graph), None)
    state = QueryState(Query("q", "x"), list(range(10)), 8)
    ledger, calls = QueryLedger(8), []
    search = method.search(state)
    try:
        request = next(search)
        while True:
            ledger.admit_documents(request.rows)
            calls.append(request.rows)
            request = search.send(sorted(request.rows, key=lambda r: -scores[r]))
    except StopIteration as stop:
        ranking = stop.value
    # window 1: the first 4; window 2: the best 2 + frontier (12 from 1, 13 from 2: the whole ranked window feeds
    # it, best first); window 3: the best 2 + the next unseen initial-list documents 4 and 5
    assert calls == [(0, 1, 2, 3), (1, 2, 12, 13), (13, 1, 4, 5)]
    assert ranking == [13, 5, 4, 1, 12, 2, 0, 3] and len(ledger.reranked) == 8
    assert method.neighbours(0) == [10, 11]  # k = the DiskANN degree for 20 documents (8): both kept


def test_diskann_start_point_is_the_medoid(tmp_path):
    from garen_infer.index.proximity_graph import (
        ProximityGraph,
        ProximityGraphParams,
        medoid,
        read_diskann_graph,
    )

    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((300, 16)).astype(np.float32) + 0.3
    vectors[0] = -vectors.mean(axis=0) * 5  # document 0 far from the centre
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    centre = medoid(vectors)
    for start, expected in (("medoid", centre), ("first", 0)):
        ProximityGraph.build(vectors, ProximityGraphParams(start=start), tmp_path / start)
        graph = ProximityGraph.load(tmp_path / start)
        lists, _, _ = read_diskann_graph(tmp_path / start / "ann")
        into_start = sum(int((row == len(vectors)).sum()) for row in lists[: len(vectors)])
        indegree = np.bincount(graph.neighbours, minlength=len(vectors))
        assert graph.meta["start_document"] == expected and into_start > 0
        assert indegree[expected] >= into_start  # edges into DiskANN's start point land on that document
        assert graph.search(vectors[[5, 7]], k=1) == [[5], [7]]  # search answers corpus rows either way
    assert centre != 0


def test_rgs_author_slidegar_stops_when_nothing_new_is_left():
    from types import SimpleNamespace

    from garen_infer.data.dataset import Query
    from garen_infer.methods.base import QueryState
    from garen_infer.methods.slidegar import SlideGar, SlideGarConfig

    method = SlideGar(SlideGarConfig(window=4, step=2, variant="rgs-author"),
                      SimpleNamespace(knn_graph=FakeKnn({}, 6)), None)
    search = method.search(QueryState(Query("q", "x"), [0, 1, 2, 3], 100))  # no graph edges, 4 documents in all
    request, calls = next(search), []
    try:
        while True:
            calls.append(request.rows)
            request = search.send(list(reversed(request.rows)))
    except StopIteration as stop:
        ranking = stop.value
    assert calls == [(0, 1, 2, 3)] and ranking == [3, 2, 1, 0]  # each observed document once
