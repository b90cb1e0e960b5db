"""RGS (methods/rgs.py) on hand-built graphs with a scripted reranker, and the DiskANN proximity graph stage.

The scripted reranker orders a window by a fixed score table, so every list, window and expansion below can be
followed by hand (the expected values in the first tests were worked out on paper, not by running the code).
"""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import numpy as np
import pytest

from garen_infer.data.dataset import Query
from garen_infer.errors import GarenError
from garen_infer.llm.ledger import BudgetExceeded, QueryLedger
from garen_infer.llm.requests import Rerank
from garen_infer.llm.types import Completion
from garen_infer.methods.base import QueryState, make_config
from garen_infer.methods.rgs import ReRankerGuidedSearch, list_length_for
from garen_infer.methods.window import window_bounds
from garen_infer.testing.methods import drive as drive_search


# ---- a hand-built graph, a scripted reranker and a tiny driver --------------------------------------------------
class FakeGraph:
    def __init__(self, adjacency: dict[int, list[int]]):
        self.adjacency = adjacency

    def of(self, row: int) -> list[int]:
        return list(self.adjacency.get(row, []))


class RecordingRgs(ReRankerGuidedSearch):
    """RGS that records the order in which documents are expanded."""

    def __init__(self, *args):
        super().__init__(*args)
        self.expanded: list[int] = []

    def neighbours(self, row: int) -> list[int]:
        self.expanded.append(row)
        return super().neighbours(row)


def make_rgs(adjacency, **options) -> RecordingRgs:
    options.setdefault("first_stage", "run")
    options.setdefault("backfill", True)  # the worked examples below include the first-stage backfill
    config = make_config(ReRankerGuidedSearch, options)
    index = SimpleNamespace(proximity_graph=FakeGraph(adjacency))
    return RecordingRgs(config, index, None)


def by_score(scores: dict[int, float]):
    return lambda rows: sorted(rows, key=lambda r: -scores[r])  # stable: ties keep the window's order


def drive(method, first_stage: list[int], budget: int, rerank):
    """Run one query's generator the way the scheduler does, with the ledger refusing any budget overrun."""
    state = QueryState(Query("q", "query"), list(first_stage), budget)
    ledger = QueryLedger(budget)
    ranking, requests = drive_search(method.search(state), lambda request: rerank(request.rows), ledger)
    assert all(isinstance(r, Rerank) for r in requests)
    return ranking, [r.rows for r in requests], ledger, state.trace


# The worked example: w = 4, step 2, L = 4, budget 9.
GRAPH = {0: [2, 3, 4], 1: [5], 2: [6, 7, 8], 6: [9, 0], 8: [10]}
SCORES = {0: 5, 1: 3, 2: 9, 3: 1, 4: 4, 5: 2, 6: 8, 7: 0, 8: 7, 9: 6, 10: -1}
FIRST = [0, 1, 3, 5]
SMALL = dict(window=4, stride=2, list_length=4)


def test_code_behaviour_worked_example():
    method = make_rgs(GRAPH, seeds=2, **SMALL)  # follow="code": early stop on
    ranking, calls, ledger, trace = drive(method, FIRST, 9, by_score(SCORES))
    assert calls == [
        (0, 1),  # the seeds, one pass
        (1, 2, 3, 4), (0, 2, 4),  # expand 0: windows [1,5) and [0,3); 3 falls off when truncating to L = 4
        (1, 6, 7, 8), (0, 4, 6, 8), (2, 6, 8),  # expand 2: 6 and 8 climb to the top, 4, 1, 7 fall off
        (6, 8, 0, 9),  # expand 6: 9 settles at position 3; the next window [2, 6, 8] holds no new doc: stop
    ]
    assert method.expanded == [0, 2, 6]
    assert ranking == [2, 6, 8, 9] + [3] + [4, 1, 7] + [0] + [5]  # A, the cuts in order, unseen first stage
    assert len(ledger.reranked) == 9 and trace["budget_used"] == 9 and trace["stop"] == "budget"
    assert trace["early_stops"] == 1 and trace["windows"] == len(calls) and trace["expansions"] == 3


def test_paper_behaviour_worked_example():
    method = make_rgs(GRAPH, follow="paper", **SMALL)  # one seed, full back-to-front passes
    ranking, calls, ledger, trace = drive(method, FIRST, 9, by_score(SCORES))
    assert calls == [
        (0, 2, 3, 4),  # the lone seed 0 is not asked about alone; it is ranked with its neighbours
        (3, 6, 7, 8), (0, 4, 6, 8), (2, 6, 8),
        (6, 8, 0, 9), (2, 6, 8),  # no early stop: the pass goes on to the front
        (6, 8, 9, 10), (2, 6, 8),
    ]
    assert method.expanded == [0, 2, 6, 8]
    assert ranking == [2, 6, 8, 9] + [4, 3, 7] + [0] + [10] + [1, 5]
    assert len(ledger.reranked) == 9 and trace["seeds"] == 1 and trace["early_stops"] == 0


def test_switch_parts_can_be_set_one_by_one():
    method = make_rgs(GRAPH, seeds=2, early_stop=False, **SMALL)
    _, calls, _, _ = drive(method, FIRST, 9, by_score(SCORES))
    assert calls[-2:] == [(6, 8, 0, 9), (2, 6, 8)]  # the window the code's early stop skips
    code, paper = make_rgs(GRAPH), make_rgs(GRAPH, follow="paper")
    assert (code.seed_count(100), code.seed_count(300), code.seed_count(500)) == (20, 60, 100)
    assert (paper.seed_count(500), code.stops_early(), paper.stops_early()) == (1, True, False)
    assert [list_length_for(k) for k in (100, 200, 300, 500)] == [20, 20, 30, 50]
    with pytest.raises(GarenError):
        make_rgs(GRAPH, follow="both")
    with pytest.raises(GarenError):
        make_rgs(GRAPH, first_stage="bm25")


def test_neighbours_are_cut_to_the_remaining_budget():
    method = make_rgs(GRAPH, seeds=2, **SMALL)
    ranking, calls, ledger, trace = drive(method, FIRST, 4, by_score(SCORES))
    assert calls == [(0, 1), (0, 1, 2, 3)]  # 0's neighbours [2, 3, 4] cut to 2; 4 is never sent
    assert ledger.reranked == {0, 1, 2, 3} and method.expanded == [0]
    assert ranking == [2, 0, 1, 3, 5]  # unseen first-stage docs follow; 4 was never seen by the search


def test_truncation_keeps_the_list_at_L_and_expands_the_first_unexpanded():
    adjacency = {d: [(d * 21 + 5 * j + 1) % 60 for j in range(5)] for d in range(60)}  # does not converge before 40
    scores = {d: (d * 37) % 60 for d in range(60)}
    lengths, firsts = [], []

    class Watching(RecordingRgs):
        def neighbours(self, row):
            lengths.append(len(self._A))
            firsts.append(next(d for d in self._A if d not in self.expanded))
            return super().neighbours(row)

        def _insert(self, A, new, seen, early_stop, stats):
            self._A = A
            return (yield from super()._insert(A, new, seen, early_stop, stats))

    config = make_config(ReRankerGuidedSearch, dict(first_stage="run", seeds=8, **SMALL))
    method = Watching(config, SimpleNamespace(proximity_graph=FakeGraph(adjacency)), None)
    ranking, _, ledger, _ = drive(method, list(range(60)), 40, by_score(scores))
    assert all(n <= 4 for n in lengths)  # A is truncated to L after every insert (seeds included)
    assert firsts == method.expanded  # each step expands the first unexpanded document of A
    assert ranking[:4] == sorted(ranking[:4], key=lambda d: -scores[d])
    assert len(ledger.reranked) == 40 and len(ranking) == len(set(ranking)) == 40  # every observed document, once


@pytest.mark.parametrize("follow", ["code", "paper"])
@pytest.mark.parametrize("seed", range(6))
def test_budget_never_exceeded_and_used_when_the_graph_allows(follow, seed):
    rng = random.Random(seed)
    n = rng.choice([30, 80, 200])
    adjacency = {d: rng.sample(range(n), rng.randint(0, 6)) for d in range(n)}
    scores = {d: rng.random() for d in range(n)}
    budget = rng.choice([5, 10, 25, 60, 100, 300])
    options = dict(follow=follow, window=rng.choice([4, 6, 20]), list_length=rng.choice([3, 8, 20]))
    options["stride"] = options["window"] // 2
    method = make_rgs(adjacency, **options)
    first = rng.sample(range(n), n)
    ranking, calls, ledger, trace = drive(method, first, budget, by_score(scores))  # the ledger raises on overrun
    assert len(ledger.reranked) <= budget and trace["budget_used"] <= budget
    assert all(len(c) <= options["window"] for c in calls)
    # every document the search committed was really sent to the reranker (bar a lone paper seed never compared)
    assert trace["budget_used"] - len(ledger.reranked) in ((0, 1) if follow == "paper" else (0,))
    if trace["stop"] == "converged":  # budget left only if every listed document is expanded with no unseen neighbour
        seen = set(ledger.reranked) | set(first[:1])
        assert all(d in method.expanded for d in ranking[: trace["list_length"]] if d in seen)
        assert all(nb in seen for d in method.expanded for nb in adjacency[d])
    else:
        assert trace["budget_used"] == budget
    assert sorted(ranking) == sorted(set(ranking)) and set(ranking) <= set(range(n))


def test_budget_fully_used_on_a_connected_graph():
    n = 120
    adjacency = {d: [(d + 1) % n, (d + 17) % n, (d + 60) % n] for d in range(n)}  # strongly connected
    scores = {d: ((d * 53) % n) / n for d in range(n)}
    for budget in (100, 300):  # 300 > n: all n documents are reachable, so all n are used
        for follow in ("code", "paper"):
            method = make_rgs(adjacency, follow=follow, list_length=n)  # L >= n: nothing is lost by truncation
            _, _, ledger, trace = drive(method, list(range(n)), budget, by_score(scores))
            assert len(ledger.reranked) == min(budget, n), (budget, follow, trace)


def test_ledger_refuses_an_overrun():
    ledger = QueryLedger(3)
    ledger.admit_documents([1, 2])
    ledger.admit_documents([1, 2, 3])  # re-ranking seen documents costs nothing
    with pytest.raises(BudgetExceeded):
        ledger.admit_documents([3, 4])


def test_bad_reranker_answer_is_refused():
    method = make_rgs(GRAPH, seeds=2, **SMALL)
    with pytest.raises(GarenError, match="not a permutation"):
        drive(method, FIRST, 9, lambda rows: list(rows)[:-1])


def test_scheduler_batches_rgs_and_matches_the_driver():
    from garen_infer.llm.roles import Roles
    from garen_infer.running.scheduler import Scheduler

    class ScriptedReranker:
        def rerank(self, jobs):
            return [(by_score(SCORES)(job.rows), Completion()) for job in jobs]

    method = make_rgs(GRAPH, seeds=2, **SMALL)
    states = [QueryState(Query(f"q{i}", "query"), FIRST, 9) for i in range(3)]
    finished = list(Scheduler(Roles(reranker=ScriptedReranker()), max_active=2).run(states, method.search))
    expected, calls, _, _ = drive(make_rgs(GRAPH, seeds=2, **SMALL), FIRST, 9, by_score(SCORES))
    assert len(finished) == 3
    for item in finished:
        assert item.ranking == expected
        summary = item.ledger.summary()
        assert summary["budget_used"] == 9 and summary["requests"] == len(calls) == 7


def test_window_bounds_cover_a_list_of_window_minus_stride():
    # rank_llm's loop test skipped every window when n == w - stride (a 10-document pool was never reranked)
    assert window_bounds(10) == [(0, 10)]
    assert window_bounds(2, 4, 2) == [(0, 2)]
    assert window_bounds(100)[0] == (80, 100) and window_bounds(100)[-1] == (0, 20) and len(window_bounds(100)) == 9
    assert window_bounds(25) == [(5, 25), (0, 15)]


# ---- the proximity graph stage, for real -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def random_graph(tmp_path_factory):
    from garen_infer.index.stages import STAGES, load_optional_stages

    load_optional_stages()
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((400, 24)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    folder = tmp_path_factory.mktemp("pg")
    np.save(folder / "embeddings.npy", vectors)
    stage = STAGES["proximity_graph"]
    params = stage.params_type()
    info = stage.build(SimpleNamespace(path=folder), None, params)
    return folder, vectors, info


def test_proximity_graph_stage_builds_a_valid_graph(random_graph):
    from garen_infer.index.proximity_graph import ProximityGraph, degree_for

    folder, vectors, info = random_graph
    graph = ProximityGraph.load(folder / "proximity_graph")
    n, degree = len(vectors), degree_for(len(vectors))
    assert degree == 8 and info["degree"] == 8 and graph.degree == 8 and len(graph) == n
    assert info["degree_max"] <= 8 and info["degree_min"] >= 1
    for row in range(n):
        out = graph.of(row)
        assert all(0 <= i < n for i in out) and row not in out and len(out) == len(set(out)) <= degree
    # the persisted lists equal DiskANN's own, in corpus rows (the medoid was built first, as DiskANN id 0), with
    # the frozen start point (id n, a copy of the medoid) read as the medoid
    from garen_infer.index.proximity_graph import built_to_row

    index, start = graph._index, graph.meta["start_document"]
    for built in range(n):
        row = int(built_to_row([built], start)[0])
        raw = built_to_row([0 if i == n else int(i) for i in index.get_neighbors(built)], start).tolist()
        assert graph.of(row) == [i for i in dict.fromkeys(raw) if i != row]
    meta = json.loads((folder / "proximity_graph" / "meta.json").read_text())
    assert meta["doc_count"] == n and meta["diskann_start"] == n and meta["frozen_points"] == 1


def test_proximity_graph_search_and_determinism(random_graph, tmp_path):
    from garen_infer.index.proximity_graph import ProximityGraph, ProximityGraphParams

    folder, vectors, _ = random_graph
    graph = ProximityGraph.load(folder / "proximity_graph")
    found = graph.search(vectors[:5], k=5000, list_size=5000)  # k capped at the corpus size
    assert all(sorted(rows) == list(range(len(vectors))) for rows in found)
    assert [rows[0] for rows in found] == [0, 1, 2, 3, 4]
    again = ProximityGraph.build(vectors, ProximityGraphParams(), tmp_path / "again")
    rebuilt = ProximityGraph.load(tmp_path / "again")
    assert again["edges"] == len(graph.neighbours)
    assert np.array_equal(rebuilt.offsets, graph.offsets) and np.array_equal(rebuilt.neighbours, graph.neighbours)


def test_degree_by_corpus_size():
    from garen_infer.index.proximity_graph import degree_for

    assert [degree_for(n) for n in (5183, 10_000, 10_001, 100_000, 100_001, 1_000_000, 1_000_001)] == [
        8,
        8,
        12,
        12,
        16,
        16,
        32,
    ]


def test_rgs_end_to_end_on_the_tiny_corpus(tiny_dataset, tmp_path):
    """Index (bm25, embeddings, proximity graph), then ``execute`` RGS with the embedding reranker."""
    from garen_infer.configuration.presets import load_preset
    from garen_infer.index.folder import IndexFolder
    from garen_infer.index.stages import IndexConfig
    from garen_infer.llm.cache import NoCache
    from garen_infer.running.runner import RunConfig
    from garen_infer.running.session import execute

    preset = load_preset("cpu-default")
    stages = {k: preset["index"][k] for k in ("bm25", "embeddings", "proximity_graph")}
    index = IndexFolder.build(tiny_dataset, tmp_path / "index", IndexConfig.from_dict(stages), log=lambda *_: None)
    for first_stage in ("graph", "run"):
        options = dict(preset["methods"]["rgs"], first_stage=first_stage)
        config = RunConfig.build(method="rgs", method_options=options, budget=10,
                                 first_stage=preset["first_stage"], models=preset["models"])
        metrics = execute(tiny_dataset, index, config, tmp_path / f"run-{first_stage}", cache=NoCache(),
                          log=lambda *_: None)
        assert 0 < metrics["mean_budget_used"] <= 10 and metrics["nDCG@10"] > 0.5
        records = [
            json.loads(line)
            for line in (tmp_path / f"run-{first_stage}" / "trace.jsonl").read_text().splitlines()
        ]
        assert all(r["ledger"]["budget_used"] <= 10 for r in records)
        # the graph first stage encodes the query with the index's embedding model: that is model time, in the
        # ledger like the reranker's (one encoding per query, no budget); the run's first stage encodes nothing
        encoder = [r["ledger"]["roles"].get("query_encoder") for r in records]
        if first_stage == "graph":
            assert all(e is not None and e["requests"] == e["model_calls"] == 1 and e["seconds"] > 0 for e in encoder)
            assert all(
                r["ledger"]["model_seconds"] >= r["ledger"]["roles"]["query_encoder"]["seconds"]
                for r in records
            )
        else:
            assert encoder == [None] * len(records)


def test_depth_caps_the_backfill_not_the_searched_documents():
    first = FIRST + list(range(11, 40))
    ranking, _, _, _ = drive(make_rgs(GRAPH, seeds=2, depth=12, **SMALL), first, 9, by_score(SCORES))
    assert ranking == [2, 6, 8, 9, 3, 4, 1, 7, 0] + [5, 11, 12]  # 9 searched documents, then 3 of the first stage
    ranking, _, _, _ = drive(make_rgs(GRAPH, seeds=2, depth=5, **SMALL), first, 9, by_score(SCORES))
    assert ranking == [2, 6, 8, 9, 3, 4, 1, 7, 0]  # every searched document stays, whatever the depth
    ranking, _, _, _ = drive(make_rgs(GRAPH, seeds=2, backfill=False, **SMALL), first, 9, by_score(SCORES))
    assert ranking == [2, 6, 8, 9, 3, 4, 1, 7, 0]  # the default: only what the reranker observed
