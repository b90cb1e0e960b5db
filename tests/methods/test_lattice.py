"""LATTICE's search on a hand-built tree with a scripted scorer whose scores can be followed by hand: frontier order,
path relevance, slates and their references, excluded documents, the document budget, failed answers, reference-leaf
sampling, answer parsing, and LATTICE++'s fusion."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np
import pytest

from garen_infer.data.dataset import Dataset, Document, Query
from garen_infer.index.tree.semantic_tree import BuiltNode, SemanticTree
from garen_infer.llm.requests import Generate, ScoreYesNo
from garen_infer.llm.types import Completion
from garen_infer.methods.base import QueryState
from garen_infer.methods.lattice import Lattice, LatticeConfig
from garen_infer.methods.lattice.search_tree import SearchTree
from garen_infer.methods.lattice.slates import gmm_threshold, parse_slate_scores, reference_leaves
from garen_infer.testing.methods import drive

#  node ids (depth-first pre-order):
#  0 root
#  1 topic A            9 topic B
#  2 cluster A1         10 cluster B1
#    3 a1  4 a2  5 a3     11 b1  12 b2
#  6 cluster A2         13 cluster B2
#    7 a4  8 a5           14 b3  15 b4
DOCS = ["a1", "a2", "a3", "a4", "a5", "b1", "b2", "b3", "b4"]  # corpus rows 0..8
SCORES = {  # the scripted scorer's answer for each text
    "topic A": 0.8, "topic B": 0.3,
    "cluster A1": 0.9, "cluster A2": 0.2, "cluster B1": 0.5, "cluster B2": 0.05,
    "doc a1": 0.9, "doc a2": 0.4, "doc a3": 0.7, "doc a4": 0.6, "doc a5": 0.1,
    "doc b1": 0.8, "doc b2": 0.2, "doc b3": 0.3, "doc b4": 0.5,
}


def hand_built_tree() -> SemanticTree:
    a = BuiltNode("topic A", "hand",
                  [BuiltNode("cluster A1", "hand", [0, 1, 2]), BuiltNode("cluster A2", "hand", [3, 4])])
    b = BuiltNode("topic B", "hand", [BuiltNode("cluster B1", "hand", [5, 6]), BuiltNode("cluster B2", "hand", [7, 8])])
    return SemanticTree.from_built(BuiltNode("", "root", [a, b]), {"construction": "hand"})


@dataclass
class TreeOnlyIndex:
    """The parts of an index folder LATTICE reads: its path, its rows by document id, the stage check."""

    path: object
    doc_ids: list

    @property
    def row_of_id(self):
        return {d: i for i, d in enumerate(self.doc_ids)}

    def require(self, stage, why):
        return {}


@pytest.fixture
def make_lattice(tmp_path):
    (tmp_path / "semantic_tree").mkdir()
    hand_built_tree().save(tmp_path / "semantic_tree", DOCS)
    dataset = Dataset("hand", [Document(d, f"doc {d}") for d in DOCS], [])

    def make(**options):
        return Lattice(LatticeConfig(**{"slate_scorer": "navigator", **options}),
                       TreeOnlyIndex(tmp_path, DOCS), dataset)

    return make


def scripted(request):
    return [SCORES[t] for t in request.texts]


def state(excluded=(), budget=None):
    return QueryState(Query("q", "the query", frozenset(excluded)), [], budget)


# ---- the search tree: path relevance and frontier order --------------------------------------------------------
def test_path_relevance_and_frontier_order_by_hand():
    tree = SearchTree(hand_built_tree(), set(), alpha=0.5, gate=0.09, mode="code")
    assert tree.frontier(give_up_after=2) == [0]
    tree.expand(0, {1: 0.8, 9: 0.3})
    assert tree.path[1] == pytest.approx(0.9) and tree.path[9] == pytest.approx(0.65)  # 0.5 * s + 0.5 * 1
    tree.expand(1, {2: 0.9, 6: 0.05})
    assert tree.path[2] == pytest.approx(0.9)
    assert tree.path[6] == pytest.approx(0.05)  # at or below 0.09: not smoothed, the subtree sinks
    assert tree.frontier(2) == [2, 9, 6]
    tree.expand(9, {10: 0.8, 13: 0.8})
    assert tree.path[10] == tree.path[13] == pytest.approx(0.725)
    assert tree.frontier(2) == [2, 10, 13, 6]  # equal paths keep depth-first order
    assert tree.best_at_depth(1) == 1 and tree.best_at_depth(2) == 2

    tree.expand(2, {3: 1.0, 4: 0.5, 5: 0.0})
    tree.calibrated[[3, 4, 5]] = [1.0, 0.2, 0.6]
    # final leaf score: (1 - alpha) * path(parent) + alpha * calibrated(leaf), no gate
    assert tree.leaf_scores() == [(3, pytest.approx(0.95)), (5, pytest.approx(0.75)), (4, pytest.approx(0.55))]


def test_the_path_gate_at_its_boundary_a_slate_answer_of_9():
    """The reference smooths only scores above 0.09 (``chain_path_rel_fn``); a slate answer of 9 scales to exactly
    0.09 and must not be smoothed, one of 10 must. With the default settings, from the answer's text on."""
    options = LatticeConfig()
    assert (options.path_gate, options.alpha, options.path_relevance) == (0.09, 0.5, "code")
    scores = parse_slate_scores('{"reasoning": "...", "relevance_scores": [[0, 9], [1, 10]]}', 2)
    assert scores == {0: 0.09, 1: 0.1}
    tree = SearchTree(hand_built_tree(), set(), options.alpha, options.path_gate, options.path_relevance)
    tree.expand(0, {1: scores[0], 9: scores[1]})
    assert tree.path[1] == 0.09  # at the gate: the score itself (smoothed it would be 0.545)
    assert tree.path[9] == pytest.approx(0.5 * 0.1 + 0.5 * 1.0)  # just above: smoothed with the root's path 1
    assert tree.frontier(2) == [9, 1]


def test_paper_mode_chains_calibrated_scores():
    tree = SearchTree(hand_built_tree(), set(), alpha=0.5, gate=0.09, mode="paper")
    tree.expand(0, {1: 0.8, 9: 0.3})
    tree.expand(1, {2: 0.9, 6: 0.2})
    tree.calibrate({1: 0.4, 9: 1.0, 2: 0.6, 6: 0.05})
    assert tree.path[1] == pytest.approx(0.7) and tree.path[9] == pytest.approx(1.0)
    assert tree.path[2] == pytest.approx(0.65) and tree.path[6] == pytest.approx(0.05)
    assert tree.frontier(2) == [9, 2, 6]
    code = SearchTree(hand_built_tree(), set(), alpha=0.5, gate=0.09, mode="code")
    code.expand(0, {1: 0.8, 9: 0.3})
    code.calibrate({1: 0.4, 9: 1.0})
    assert code.path[1] == pytest.approx(0.9)  # raw scores: calibration does not move the frontier


def test_a_node_whose_documents_are_all_excluded_is_masked():
    tree = SearchTree(hand_built_tree(), {7, 8}, alpha=0.5, gate=0.09, mode="code")  # rows of b3, b4
    assert tree.masked[[14, 15, 13]].all() and not tree.masked[[9, 10, 11, 0]].any()


# ---- the search with a scripted scorer ------------------------------------------------------------------------
def test_search_by_hand(make_lattice):
    lattice = make_lattice()
    state_ = state()
    rows, requests = drive(lattice.search(state_), scripted)
    texts = [list(r.texts) for r in requests]
    assert all(isinstance(r, ScoreYesNo) and r.role == "navigator" and r.by_documents for r in requests)
    # a pointwise scorer's slates carry no references: its scores cannot change with the slate
    assert texts[0] == ["topic A", "topic B"]  # iteration 1 expands the root alone
    assert texts[1] == ["cluster A1", "cluster A2", "cluster B1", "cluster B2"]  # beam = A (path 0.9), B (0.65)
    # paths now: A1 0.9, B1 0.575, A2 0.55, B2 0.05 (gated): beam = A1, B1
    assert texts[2] == ["doc a1", "doc a2", "doc a3", "doc b1", "doc b2"]
    assert texts[3] == ["doc a4", "doc a5", "doc b3", "doc b4"]
    assert len(requests) == 4  # then the frontier is empty
    assert [r.rows for r in requests][1] == ((0, 1, 2), (3, 4), (5, 6), (7, 8))  # what each node stands for
    assert sorted(rows) == list(range(9)) and rows[0] == 0  # a1: top of the best cluster
    assert [r.documents for r in requests] == [(), (), (0, 1, 2, 5, 6), (3, 4, 7, 8)]
    assert state_.trace["beams"] == [[0], [1, 9], [2, 10], [6, 13]] and state_.trace["stop"] == "frontier"


def test_pointwise_scores_are_not_recalibrated(make_lattice):
    """Without references the per-slate biases of the calibration would absorb the differences between slates;
    a pointwise score is the same in any slate, so it is its own calibrated score:
    final(leaf) = (1 - alpha) * path(parent) + alpha * score(leaf)."""
    scored, _ = drive(make_lattice().traverse(state()), scripted)
    final = dict(scored)  # corpus row -> score
    assert final[0] == pytest.approx(0.5 * 0.9 + 0.5 * 0.9)  # a1 under A1 (path 0.9)
    assert final[6] == pytest.approx(0.5 * 0.575 + 0.5 * 0.2)  # b2 under B1 (path 0.575)
    assert final[4] == pytest.approx(0.5 * 0.55 + 0.5 * 0.1)  # a5 under A2 (path 0.5 * 0.2 + 0.5 * 0.9)
    assert final[8] == pytest.approx(0.5 * 0.05 + 0.5 * 0.5)  # b4 under B2 (0.05: gated, not smoothed)


def test_num_iters_and_beam_size_bound_the_calls(make_lattice):
    _, requests = drive(make_lattice(num_iters=2).search(state()), scripted)
    assert len(requests) == 2
    _, requests = drive(make_lattice(beam_size=1).search(state()), scripted)
    assert [len(r.texts) for r in requests][:2] == [2, 2]  # one slate per iteration: A's children


def test_excluded_documents_are_never_shown_nor_returned(make_lattice):
    rows, requests = drive(make_lattice().search(state(excluded={"a1", "b3", "b4"})), scripted)
    shown = {t for r in requests for t in r.texts}
    assert not shown & {"doc a1", "doc b3", "doc b4", "cluster B2"}  # B2's documents are all excluded
    assert rows and not set(rows) & {0, 7, 8}


def test_the_document_budget_stops_the_search_and_the_ledger_counts_it(make_lattice):
    from garen_infer.llm.roles import Roles
    from garen_infer.running.scheduler import Scheduler

    class Scorer:
        name = "scripted"

        def score(self, jobs):
            return [Completion(score=SCORES[job.text]) for job in jobs]

    lattice = make_lattice()
    finished = next(Scheduler(Roles(scorers={"navigator": Scorer()})).run([state(budget=4)], lattice.search))
    assert finished.ledger.summary()["budget_used"] == 4
    # the leaf slates of iteration 3 bring a1, a2, a3 and then only b1 (b2 is cut): those four are ranked
    assert sorted(finished.ranking) == [0, 1, 2, 5]
    assert finished.state.trace["stop"] == "budget" and finished.state.trace["documents_shown"] == 4


# ---- the LLM path: JSON slate prompts, failures --------------------------------------------------------------
_CANDIDATE = re.compile(r"^\[(\d+)\]\. (.*)$", re.MULTILINE)


def scripted_llm(chat) -> str:
    """Reads the candidates off the prompt and answers the paper's JSON with the scripted scores."""
    scores = [[int(i), round(100 * SCORES[text])] for i, text in _CANDIDATE.findall(chat[-1]["content"])]
    return json.dumps({"reasoning": "scripted",
                       "ranking": [i for i, _ in sorted(scores, key=lambda p: -p[1])], "relevance_scores": scores})


def candidates(chat) -> list[str]:
    return [text for _, text in _CANDIDATE.findall(chat[-1]["content"])]


def test_llm_path_sends_json_slate_prompts_and_reaches_the_same_leaves(make_lattice):
    lattice = make_lattice(slate_scorer="generator")
    assert lattice.roles == ("generator",)
    rows, requests = drive(lattice.search(state()), lambda r: [scripted_llm(chat) for chat in r.chats])
    assert all(isinstance(r, Generate) for r in requests)
    assert [len(r.chats) for r in requests] == [1, 2, 2, 2]
    first = requests[0].chats[0][0]["content"]
    assert "[0]. topic A" in first and "[1]. topic B" in first and "the query" in first
    assert "relevance_scores" in requests[2].chats[0][0]["content"] and "heading" in requests[2].chats[0][0]["content"]
    assert "heading" not in first  # the internal prompt lacks the leaf prompt's extra rule
    texts = [[candidates(chat) for chat in r.chats] for r in requests]
    assert texts[0] == [["topic A", "topic B"]]  # no reference at the root
    # iteration 2: beam = A (path 0.9), B (0.65); each internal slate ends with the best depth-1 node, A
    assert texts[1] == [["cluster A1", "cluster A2", "topic A"], ["cluster B1", "cluster B2", "topic A"]]
    assert texts[2] == [["doc a1", "doc a2", "doc a3"], ["doc b1", "doc b2"]]  # no leaf reached yet
    # iteration 4: A2 and B2, each with the five leaves reached so far as references (<= 10: all of them)
    references = {"doc a1", "doc a2", "doc a3", "doc b1", "doc b2"}
    (a2, b2) = texts[3]
    assert a2[:2] == ["doc a4", "doc a5"] and set(a2[2:]) == references
    assert b2[:2] == ["doc b3", "doc b4"] and a2[2:] == b2[2:]  # one draw per iteration
    scorer_rows, _ = drive(make_lattice().search(state()), scripted)
    assert sorted(rows) == sorted(scorer_rows)  # the same scores reach the same leaves (ranked after calibration)


def test_a_failed_answer_leaves_the_node_on_the_frontier(make_lattice):
    answers = iter(["I would rather not."])

    def flaky(request):
        return [next(answers, None) or scripted_llm(chat) for chat in request.chats]

    rows, requests = drive(make_lattice(slate_scorer="generator").search(state()), flaky)
    assert requests[0].chats == requests[1].chats  # the root is asked again
    assert sorted(rows) == list(range(9))

    state_ = state()
    rows, requests = drive(make_lattice(slate_scorer="generator", give_up_after=2).search(state_),
                           lambda r: ["no"] * len(r.chats))
    assert rows == [] and len(requests) == 2 and state_.trace["stop"] == "frontier"
    assert state_.answer_problems == [("generator", "unreadable")] * 2  # the runner adds them to the query's ledger


def test_parse_slate_scores_is_robust():
    assert parse_slate_scores('{"reasoning": "x", "relevance_scores": [[0, 85], [1, 10]]}', 2) == {0: 0.85, 1: 0.1}
    fenced = 'Sure!\n```json\n{"ranking": [1, 0], "relevance_scores": [[0, 40], [1, 90],]}\n```'
    assert parse_slate_scores(fenced, 2) == {0: 0.4, 1: 0.9}
    nested = '{"answer": {"relevance_scores": [{"node_id": 1, "relevance_score": 70}]}}'
    assert parse_slate_scores(nested, 2) == {1: 0.7}
    assert parse_slate_scores('{"relevance_scores": [[0, 150], [5, 20], ["x", 3], [1, -4]]}', 2) == {0: 1.0, 1: 0.0}
    assert parse_slate_scores('{"relevance_scores": [[0, 50], [1, 6', 2) is not None  # cut mid-answer: repaired
    assert parse_slate_scores("I cannot rank these.", 2) is None
    assert parse_slate_scores('{"reasoning": "no scores"}', 2) is None


def test_a_fenced_answer_whose_reasoning_quotes_fenced_code_is_read():
    """leetcode, pony, aops, theoremqa: the reasoning quotes code in fences of its own inside the fenced JSON."""
    text = ('```json\n{"reasoning": "Candidate 0 defines the function:\\n```python\\ndef two_sum(nums, target):\\n'
            '    seen = {}\\n```\\nwhich the query needs.", "relevance_scores": [[0, 85], [1, 10]]}\n```')
    assert parse_slate_scores(text, 2) == {0: 0.85, 1: 0.1}


# ---- reference leaves --------------------------------------------------------------------------------------
def test_reference_leaf_sampling_is_reproducible_under_a_seed():
    leaves = np.arange(40)
    calibrated = np.concatenate([np.linspace(0.7, 1.0, 15), np.linspace(-0.2, 0.2, 25)])
    threshold = gmm_threshold(np.maximum(calibrated, -1.0), 42)
    assert 0.2 < threshold < 0.7  # the density minimum between the two modes

    def draw(query_seed):
        return reference_leaves(leaves, calibrated, 10, np.random.default_rng([42, query_seed]), 42)

    first = draw(7)
    assert first == draw(7) and len(set(first)) == 10
    assert all(calibrated[i] > threshold for i in first)  # 4^(2s) above the threshold, 1e-4 below
    assert any(draw(s) != first for s in range(8, 12))  # another query draws its own sample
    few = np.array([3, 1, 2])
    assert reference_leaves(few, np.array([0, 0.1, 0.9, 0.5]), 10, np.random.default_rng(0), 0) == [2, 3, 1]


# ---- LATTICE++ -------------------------------------------------------------------------------------------------
def test_fusion_min_max_normalises_each_system():
    from garen_infer.methods.lattice.fusion import fuse

    lattice = [(0, 0.9), (1, 0.5), (2, 0.1)]
    bm25 = [(2, 12.0), (3, 4.0)]
    dense = [(1, 0.8), (2, 0.6), (0, 0.4)]
    fused = dict(fuse([lattice, bm25, dense], [0.6, 0.2, 0.2]))
    assert fused[0] == pytest.approx(0.6 * 1.0 + 0.2 * 0.0)
    assert fused[1] == pytest.approx(0.6 * 0.5 + 0.2 * 1.0)
    assert fused[2] == pytest.approx(0.6 * 0.0 + 0.2 * 1.0 + 0.2 * 0.5)
    assert fused[3] == pytest.approx(0.0)


# ---- the CPU stand-in: the embedding scorer judges a node by what lies beneath it -------------------------------
def test_the_embedding_scorer_scores_an_internal_node_by_its_documents_centroid(tiny_dataset, tiny_index, tmp_path):
    """LATTICE with the embedding navigator (cpu-default) and the index's MiniLM, on a tree of the tiny corpus's
    three topics: an internal node is scored (1 + cos(query, normalised centroid of its documents' vectors)) / 2,
    not by embedding its description; a document by its own vector."""
    from garen_infer.llm.roles import ScoreJob, build_scorer

    topics = [BuiltNode(f"topic {t}: a description", "hand", list(range(4 * t, 4 * t + 4))) for t in range(3)]
    (tmp_path / "semantic_tree").mkdir()
    SemanticTree.from_built(BuiltNode("", "root", topics)).save(tmp_path / "semantic_tree", tiny_dataset.doc_ids)
    lattice = Lattice(LatticeConfig(slate_scorer="navigator"), TreeOnlyIndex(tmp_path, tiny_dataset.doc_ids),
                      tiny_dataset.without_judgments())
    scorer = build_scorer({"backend": "embedding"}, [d.full_text for d in tiny_dataset.documents], tiny_index, None)
    query = tiny_dataset.queries[0]
    items = []

    def answer(request):
        jobs = [
            ScoreJob(query.text, t, query.id, rows, request.by_documents)
            for t, rows in zip(request.texts, request.rows)
        ]
        items.extend(jobs)
        return [c.score for c in scorer.score(jobs)]

    drive(lattice.search(QueryState(query, [], None)), answer)
    vectors = np.asarray(tiny_index.embeddings, dtype=np.float64)
    q = np.asarray(tiny_index.embedder.query_vectors([query.text])[0], dtype=np.float64)
    assert [job.rows for job in items[:3]] == [(0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11)]
    for job in items[:3]:
        centroid = vectors[list(job.rows)].mean(axis=0)
        expected = (1 + centroid @ q / np.linalg.norm(centroid)) / 2
        assert scorer.score([job])[0].score == pytest.approx(expected, abs=1e-5)
        described = scorer.score([ScoreJob(query.text, job.text, query.id, job.rows, False)])[0].score
        assert described != pytest.approx(expected, abs=1e-3)  # what embedding the description would give
    described_run = Lattice(LatticeConfig(slate_scorer="navigator", node_evidence="description"),
                            TreeOnlyIndex(tmp_path, tiny_dataset.doc_ids), tiny_dataset.without_judgments())
    _, requests = drive(described_run.search(QueryState(query, [], None)), lambda r: [0.5] * len(r.texts))
    assert not any(r.by_documents for r in requests)  # node_evidence: description embeds the descriptions
    leaf = items[3]
    assert leaf.text == tiny_dataset.documents[leaf.rows[0]].full_text
    assert scorer.score([leaf])[0].score == pytest.approx((1 + vectors[leaf.rows[0]] @ q) / 2, abs=1e-5)
