"""GAREN's online algorithm (Algorithm 1, App. E, sec. 4.3) on small hand-built graphs, with a scripted
reranker and navigator whose answers are known in advance."""

from __future__ import annotations

import numpy as np
import pytest

from garen_infer.data.dataset import Dataset, Document, Query
from garen_infer.index.grouping.groups import Groups
from garen_infer.index.knn_graph import KnnGraph
from garen_infer.llm.requests import Rerank, ScoreYesNo
from garen_infer.methods.base import QueryState
from garen_infer.methods.garen import Garen, GarenConfig
from garen_infer.testing.methods import drive as drive_search
from garen_infer.testing.methods import scripted_answers


class HandBuiltIndex:
    """The two index structures GAREN reads, built from explicit lists."""

    def __init__(self, neighbours: list[list[int]], members: list[list[int]]):
        k = max(len(n) for n in neighbours)
        rows = [n + [i] * (k - len(n)) for i, n in enumerate(neighbours)]  # pad with self-loops like np_topk
        self.knn_graph = KnnGraph(np.array(rows, dtype=np.uint32), np.ones((len(rows), k), dtype=np.float16))
        doc_group = [0] * len(neighbours)
        for g, rows_ in enumerate(members):
            for r in rows_:
                doc_group[r] = g
        self._groups = Groups(doc_group, members, [f"G{g}" for g in range(len(members))],
                              [f"group {g}" for g in range(len(members))])

    def groups(self, stage="groups"):
        return self._groups


def make_garen(neighbours, members, **options) -> Garen:
    n = len(neighbours)
    dataset = Dataset("hand", [Document(str(i), f"doc {i}") for i in range(n)], [Query("q", "query")])
    return Garen(GarenConfig(**options), HandBuiltIndex(neighbours, members), dataset)


def drive(search, relevance: dict[int, float], group_score: dict[str, float], log: list):
    """Answer a GAREN search: the reranker orders by ``relevance``; the navigator reads ``group_score`` by text."""
    ranking, requests = drive_search(search, scripted_answers(relevance, texts=group_score))
    log.extend(requests)
    return ranking


# ---- a 200-document world: 20 groups of 10 rows (group g = rows 10g..10g+9) ------------------------------------
N_GROUPS, SIZE = 20, 10
MEMBERS = [list(range(g * SIZE, (g + 1) * SIZE)) for g in range(N_GROUPS)]


def ring_neighbours() -> list[list[int]]:
    """Each document links to the next two in its group and to the same position in the next two groups."""
    out = []
    for d in range(N_GROUPS * SIZE):
        g, i = divmod(d, SIZE)
        out.append([g * SIZE + (i + 1) % SIZE, g * SIZE + (i + 2) % SIZE, ((g + 1) % N_GROUPS) * SIZE + i,
                    ((g + 2) % N_GROUPS) * SIZE + i])
    return out


def world_state(budget=100) -> QueryState:
    first_stage = list(range(0, 200, 3)) + [d for d in range(200) if d % 3]  # every third row first
    return QueryState(Query("q", "query"), first_stage, budget)


def test_budget_window_sequence_and_cache_reuse():
    garen = make_garen(ring_neighbours(), MEMBERS)
    state = world_state()
    log: list = []
    relevance = {d: float(d % 7) for d in range(200)}
    ranking = drive(garen.search(state), relevance, {f"G{g}: group {g}": g / 20 for g in range(20)}, log)

    reranks = [r for r in log if isinstance(r, Rerank)]
    assert len(reranks) == 9  # 1 + (100 - 20) / (20 - 10)
    assert all(len(r.rows) == 20 for r in reranks)
    assert reranks[0].rows == tuple(state.first_stage[:20])  # W_1 = R_0[:w]
    for before, after in zip(reranks, reranks[1:]):  # W_{t+1} starts with the top h of the reranked W_t
        kept = sorted(before.rows, key=lambda d: -relevance[d])[:10]
        assert list(after.rows[:10]) == kept
    distinct = set().union(*(r.rows for r in reranks))
    assert len(distinct) == 100 and set(ranking) == distinct  # exactly the budget, and every observed doc is ranked

    scored_texts = [t for r in log if isinstance(r, ScoreYesNo) for t in r.texts]
    assert len(scored_texts) == len(set(scored_texts))  # a group is scored once per query: the cache is reused
    assert all(len(r.texts) <= 20 for r in log if isinstance(r, ScoreYesNo))  # K_g
    assert sum(isinstance(r, ScoreYesNo) for r in log) == 8  # no navigation after the last reranking


def test_reranker_and_navigator_are_issued_together():
    garen = make_garen(ring_neighbours(), MEMBERS)
    search = garen.search(world_state())
    first = next(search)
    assert isinstance(first, tuple) and isinstance(first[0], Rerank) and isinstance(first[1], ScoreYesNo)


def test_vote_rule_scores_the_most_connected_groups_first():
    # window = rows 0, 1, 2; their neighbourhoods touch group 1 from all three, group 2 from two, group 3 from one
    neighbours = [[3, 5, 7], [3, 5], [4]] + [[0]] * 6
    members = [[0, 1, 2], [3, 4], [5, 6], [7, 8]]
    garen = make_garen(neighbours, members, k_groups=2)
    candidates, votes = garen.candidate_groups([0, 1, 2])
    assert candidates == [1, 2, 3] and votes == {1: 3, 2: 2, 3: 1}
    assert garen.groups_to_score(candidates, votes, scores={}, first_stage=[0, 1, 2], observed={0, 1, 2}) == [1, 2]
    # a group scored before is reused, not rescored, so the budget goes to the next best
    assert garen.groups_to_score(candidates, votes, scores={1: 0.9}, first_stage=[0, 1, 2],
                                 observed={0, 1, 2}) == [2, 3]


def test_fill_rule_adds_groups_of_top_ranked_uncovered_documents():
    neighbours = [[1], [0]] + [[0]] * 8
    members = [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]
    garen = make_garen(neighbours, members, k_groups=3)
    candidates, votes = garen.candidate_groups([0, 1])  # only group 0 is reachable
    first_stage = [0, 1, 6, 7, 2, 8]  # rows 6/7 (group 3) rank above row 2 (group 1) and row 8 (group 4)
    chosen = garen.groups_to_score(candidates, votes, scores={}, first_stage=first_stage, observed={0, 1})
    assert chosen == [0, 3, 1]
    # groups already scored count as covered: the scan moves on to the next uncovered one
    chosen = garen.groups_to_score(candidates, votes, scores={3: 0.5}, first_stage=first_stage, observed={0, 1})
    assert chosen == [0, 1, 4]


def test_explore_is_round_robin_and_exploit_is_depth_first():
    members = [[0, 1, 2], [3, 4], [5]]
    garen = make_garen([[0]] * 8, members)
    state = QueryState(Query("q", "x"), first_stage=[2, 0, 4, 3, 5], budget=100)
    # inside a group: first-stage rank order (row 2 before 0), rows outside the first stage last (row 1)
    assert garen.expand([0, 1, 2], observed=set(), state=state, room=5, explore=True) == [2, 4, 5, 0, 3]
    assert garen.expand([0, 1, 2], observed=set(), state=state, room=5, explore=False) == [2, 0, 1, 4, 3]
    assert garen.expand([0, 1, 2], observed={2, 4}, state=state, room=3, explore=True) == [0, 3, 5]


def test_strategy_switch_at_tau():
    garen = make_garen(ring_neighbours(), MEMBERS, tau_switch=2)
    state = world_state()
    drive(garen.search(state), {d: float(d % 7) for d in range(200)},
          {f"G{g}: group {g}": g / 20 for g in range(20)}, [])
    assert [step["explore"] for step in state.trace["iterations"]] == [True, True] + [False] * 6
    for variant, expected in (("explore", [True] * 8), ("exploit", [False] * 8)):
        garen = make_garen(ring_neighbours(), MEMBERS, strategy=variant)
        state = world_state()
        drive(garen.search(state), {}, {}, [])
        assert [step["explore"] for step in state.trace["iterations"]] == expected


def test_propagation_matches_equations_8_and_9_by_hand():
    # ranking d0..d11; group 0 = {0, 2, 11}, group 1 = {1}, the rest alone
    members = [[0, 2, 11], [1]] + [[d] for d in range(3, 11)]
    garen = make_garen([[0]] * 12, members, rbp_p=0.6, alpha=0.01)
    ranking = list(range(12))
    scores = garen.propagation_scores(ranking)
    b = [0.4 * 0.6**i for i in range(10)]  # (1 - p) p^(rank - 1)
    group0 = b[0] + b[2]
    assert scores[0] == pytest.approx(b[0] + 0.01 * group0)
    assert scores[1] == pytest.approx(b[1] + 0.01 * b[1])
    assert scores[2] == pytest.approx(b[2] + 0.01 * group0)
    assert scores[11] == pytest.approx(0.01 * group0)  # outside the top 10: only its group's evidence
    assert scores[10] == 0.0
    assert garen.propagate(ranking)[-3:] == [11, 9, 10]  # 0.01 * 0.544 beats b(d9) = 0.4 * 0.6^9 + its own echo


def test_connectivity_navigator_makes_no_model_calls():
    garen = make_garen(ring_neighbours(), MEMBERS, navigator="connectivity")
    log: list = []
    drive(garen.search(world_state()), {d: float(d % 7) for d in range(200)}, {}, log)
    assert not any(isinstance(r, ScoreYesNo) for r in log)
    assert garen.roles == ("reranker",)


def test_document_level_expansion_scores_documents():
    garen = make_garen(ring_neighbours(), MEMBERS, expansion_unit="document", k_groups=None)
    log: list = []
    state = world_state()
    drive(garen.search(state), {d: float(d % 7) for d in range(200)}, {}, log)
    texts = {t for r in log if isinstance(r, ScoreYesNo) for t in r.texts}
    assert texts and all(t.startswith("doc ") for t in texts)
    assert len(set().union(*(r.rows for r in log if isinstance(r, Rerank)))) == 100


@pytest.mark.parametrize("budget", [100, 300])
def test_budgets_are_used_exactly(budget):
    garen = make_garen(ring_neighbours(), MEMBERS)
    log: list = []
    drive(garen.search(world_state(budget)), {d: float(d % 7) for d in range(200)}, {}, log)
    reranks = [r for r in log if isinstance(r, Rerank)]
    assert len(set().union(*(r.rows for r in reranks))) == min(budget, 200)


def test_a_query_with_no_first_stage_hits_asks_nothing():
    garen = make_garen(ring_neighbours(), MEMBERS)
    log: list = []
    assert drive(garen.search(QueryState(Query("q", "zzz"), [], 100)), {}, {}, log) == []
    assert log == []


def test_documents_leaving_the_window_keep_their_reranked_order():
    garen = make_garen(ring_neighbours(), MEMBERS, propagation=False)
    log: list = []
    relevance = {d: float(d % 7) for d in range(200)}
    ranking = drive(garen.search(world_state()), relevance, {f"G{g}: group {g}": g / 20 for g in range(20)}, log)
    reranks = [r for r in log if isinstance(r, Rerank)]
    last, before_last = reranks[-1], reranks[-2]
    assert ranking[:20] == sorted(last.rows, key=lambda d: -relevance[d])
    assert ranking[20:30] == sorted(before_last.rows, key=lambda d: -relevance[d])[10:]  # losers, best first


@pytest.mark.parametrize("budget", [95, 25])
def test_a_budget_off_the_window_grid_is_still_spent(budget):
    garen = make_garen(ring_neighbours(), MEMBERS)
    log: list = []
    drive(garen.search(world_state(budget)), {d: float(d % 7) for d in range(200)}, {}, log)
    assert len(set().union(*(r.rows for r in log if isinstance(r, Rerank)))) == budget
