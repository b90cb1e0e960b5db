"""GAREN on overlapping groups (a learned soft partition): every rule worked by hand on one small corpus.

Ten documents, four groups; document 2 belongs to G0 and G1 (primary G0), document 4 to G1 and G2 (primary G1):
    G0 = {0, 1, 2}   G1 = {2, 3, 4}   G2 = {4, 5, 6}   G3 = {7, 8, 9}
"""

from __future__ import annotations

import numpy as np
import pytest

from garen_infer.data.dataset import Dataset, Document, Query
from garen_infer.index.grouping.groups_format import Groups
from garen_infer.index.knn_graph import KnnGraph
from garen_infer.llm.requests import Rerank
from garen_infer.methods.base import QueryState
from garen_infer.methods.garen import Garen, GarenConfig

MEMBERS = [[0, 1, 2], [2, 3, 4], [4, 5, 6], [7, 8, 9]]
DOC_GROUPS = [(0,), (0,), (0, 1), (1,), (1, 2), (2,), (2,), (3,), (3,), (3,)]


class OverlapIndex:
    def __init__(self, neighbours: list[list[int]]):
        k = max(len(n) for n in neighbours)
        rows = [n + [i] * (k - len(n)) for i, n in enumerate(neighbours)]  # self-loop padding, as np_topk
        self.knn_graph = KnnGraph(np.array(rows, dtype=np.uint32), np.ones((len(rows), k), dtype=np.float16))
        self._groups = Groups([gs[0] for gs in DOC_GROUPS], MEMBERS, [f"G{g}" for g in range(4)],
                              [f"group {g}" for g in range(4)], DOC_GROUPS)

    def groups(self, stage="groups"):
        return self._groups


NEIGHBOURS = [[2, 3, 4], [0], [0], [4], [5], [6], [4], [4, 8], [9], [7]]


def make_garen(**options) -> Garen:
    dataset = Dataset("hand", [Document(str(i), f"doc {i}") for i in range(10)], [Query("q", "query")])
    return Garen(GarenConfig(**options), OverlapIndex(NEIGHBOURS), dataset)


def test_votes_count_each_group_once_per_window_document():
    # N(0) = {2, 3, 4} holds G1 three times (2, 3 and 4) and G0, G2 once; N(7) = {4, 8} holds G1, G2, G3
    candidates, votes = make_garen().candidate_groups([0, 7])
    assert candidates == [0, 1, 2, 3]  # first seen: 2 -> G0, G1; 4 -> G2; then 8 -> G3
    assert votes == {0: 1, 1: 2, 2: 2, 3: 1}


def test_fill_rule_counts_a_document_covered_when_any_of_its_groups_is():
    garen = make_garen(k_groups=3)
    first_stage = [7, 2, 3, 5, 9]
    # window [7] reaches G3 only; row 2 (G0 and G1, none covered) adds its primary G0; row 3 adds G1
    assert garen.groups_to_score([3], {3: 1}, scores={}, first_stage=first_stage, observed={7}) == [3, 0, 1]
    # with G0 already scored, row 2 is covered through G0: row 3 adds G1 and row 5 adds G2
    assert garen.groups_to_score([3], {3: 1}, scores={0: 0.5}, first_stage=first_stage, observed={7}) == [3, 1, 2]


STATE = QueryState(Query("q", "x"), first_stage=[0, 2, 4, 1, 3, 5, 6, 7, 8, 9], budget=100)


def test_explore_skips_a_document_another_group_already_gave():
    # ranked groups G1, G0, G2; row 0 observed. Queues in first-stage order: G1 [2, 4, 3], G0 [2, 1], G2 [4, 5, 6]
    # round 1: G1 gives 2; G0's 2 is taken, so it gives 1 (and is empty); G2 gives 4
    # round 2: G1's 4 is taken, so it gives 3; G2 gives 5
    sources: list[int] = []
    assert make_garen().expand([1, 0, 2], observed={0}, state=STATE, room=5, explore=True,
                               sources=sources) == [2, 1, 4, 3, 5]
    assert sources == [1, 0, 2, 1, 2]


def test_exploit_skips_documents_given_earlier_in_the_same_expansion():
    # G1 is exhausted first (2, 4, 3); G0 then skips 2 and gives 1; G2 skips 4 and gives 5
    sources: list[int] = []
    assert make_garen().expand([1, 0, 2], observed={0}, state=STATE, room=5, explore=False,
                               sources=sources) == [2, 4, 3, 1, 5]
    assert sources == [1, 1, 1, 0, 2]


def test_propagation_sums_the_evidence_of_all_of_a_documents_groups():
    garen = make_garen(rbp_p=0.6, alpha=0.01, propagation_top=3)
    ranking = [2, 4, 0, 7, 5, 3, 6]
    b2, b4, b0 = 0.4, 0.4 * 0.6, 0.4 * 0.6**2  # (1 - p) p^(rank - 1) for the top 3
    g0, g1, g2 = b2 + b0, b2 + b4, b4  # G0 = {0, 1, 2}, G1 = {2, 3, 4}, G2 = {4, 5, 6}; G3 has no top document
    scores = garen.propagation_scores(ranking)
    assert scores[2] == pytest.approx(b2 + 0.01 * (g0 + g1))  # 0.41184: two groups' evidence
    assert scores[4] == pytest.approx(b4 + 0.01 * (g1 + g2))  # 0.2488
    assert scores[0] == pytest.approx(b0 + 0.01 * g0)  # 0.14944
    assert scores[3] == pytest.approx(0.01 * g1)  # 0.0064: outside the top 3, reached through G1 via rows 2 and 4
    assert scores[5] == pytest.approx(0.01 * g2) and scores[6] == pytest.approx(0.01 * g2)  # 0.0024
    assert scores[7] == 0.0
    assert garen.propagate(ranking) == [2, 4, 0, 3, 5, 6, 7]  # 5 and 6 tie: pre-propagation order


def test_a_search_on_overlapping_groups_reranks_each_document_once_and_spends_the_budget():
    garen = make_garen(window=4, keep=2, budget=10)
    log: list = []
    state = QueryState(Query("q", "x"), first_stage=[0, 7, 9, 1], budget=10)
    search = garen.search(state)
    request = next(search)
    try:
        while True:
            answers = []
            for r in request if isinstance(request, tuple) else (request,):
                log.append(r)
                answers.append(
                    sorted(r.rows) if isinstance(r, Rerank) else [0.1 * (i + 1) for i in range(len(r.texts))]
                )
            request = search.send(answers if isinstance(request, tuple) else answers[0])
    except StopIteration as stop:
        ranking = stop.value
    seen = [set(r.rows) for r in log if isinstance(r, Rerank)]
    assert len(set().union(*seen)) == 10 and sorted(ranking) == list(range(10))
    for step in state.trace["iterations"]:
        assert set(step["selected"]) <= set(state.trace["scored_groups"])


def test_diagnostics_count_a_gold_document_scored_when_any_of_its_groups_was():
    garen = make_garen(window=2, keep=1)
    state = QueryState(Query("q", "x"), first_stage=[0, 1, 2, 3, 4], budget=10)
    state.trace.update(scored_groups=[2], selected_groups=[1])
    garen.diagnose(state, {3, 4, 9})
    gold = state.trace["gold"]
    # outside the initial window [0, 1]: rows 3 (G1), 4 (G1, G2) and 9 (G3)
    assert gold["pairs_outside_window"] == 3
    assert gold["gold_group_scored"] == 1  # row 4 through G2
    assert gold["gold_group_selected"] == 2  # rows 3 and 4 through G1
    # group graph: the window's groups {G0} point to G1 (0 -> 2, 3, 4) and G2 (0 -> 4); gold groups G1, G2, G3
    assert gold["min_hops_group_graph"] == 1
