"""REPAIR (methods/repair.py) with a scripted planning reranker on a hand-built corpus graph.

The corpus lives in three directions: e0 (the query's own topic), e1 (what plan step "alpha" needs) and e2 (what
step "beta" needs: the bridge). The first stage and the documents the reranker keeps all lie along e0/e1, so
"beta" is the under-supported step. The scripted reranker orders a window by a fixed score table and writes the
plan it is given; the step encoder maps a step's text to its direction. Every expected value below follows from
these tables by hand.
"""

from __future__ import annotations

import json
import math
import re
from types import SimpleNamespace

import numpy as np
import pytest

from garen_infer.data.dataset import Document, Query
from garen_infer.llm.ledger import QueryLedger
from garen_infer.llm.plan_steps import read_plan
from garen_infer.llm.requests import EncodeQuery, Generate
from garen_infer.methods.base import QueryState, get_method, make_config
from garen_infer.methods.repair import Repair
from garen_infer.methods.repair_signals import Verdicts, ndcg, step_signals
from garen_infer.testing.methods import drive as drive_search

E0, E1, E2 = np.eye(3, dtype=np.float32)
VECTORS = {
    **{d: 0.6 * E0 + 0.8 * E1 for d in range(8)},  # the first stage: on the query's topic and step alpha's
    8: E2,  # the bridge: a graph neighbour of a kept document, supporting only step beta
    9: E1,  # a graph neighbour of a kept document supporting the already supported step alpha
    10: E2,  # supports beta but is nobody's neighbour
    11: E2,  # supports beta but neighbours a document the reranker drops
}
GRAPH = {0: [8, 9], 1: [9], 3: [11]}
SCORES = {0: 9, 1: 8, 2: 3, 3: 2, 4: 5, 5: 4, 6: 1, 7: 0, 8: 7, 9: 6, 10: 0, 11: 0}
FIRST = [0, 1, 2, 3, 4, 5, 6, 7]
STEP_VECTORS = {"alpha": E1, "beta": E2}
SMALL = dict(window=4, keep=2, budget=10, expand_from=2, verdict_windows=1, alpha=0.0, beta=0.0)


class FakeGraph:
    def of(self, row: int) -> list[int]:
        return list(GRAPH.get(row, []))


def make_repair(**options) -> Repair:
    config = make_config(Repair, {**SMALL, **options})
    index = SimpleNamespace(embeddings=np.stack([VECTORS[d] for d in range(12)]), knn_graph=FakeGraph())
    dataset = SimpleNamespace(documents=[Document(str(d), f"document {d}") for d in range(12)], doc_index={})
    return Repair(config, index, dataset)


def planner(steps: list[str]):
    """A scripted planning reranker: the plan it is given, then the window by SCORES, in the prompt's format."""
    def answer(rows: tuple[int, ...]) -> str:
        order = sorted(range(len(rows)), key=lambda i: -SCORES[rows[i]])
        plan = "".join(f"Step {n}: {s}\n" for n, s in enumerate(steps, start=1))
        return f"[Reasoning Trace]\n{plan}[Document Ranking]\n" + " > ".join(f"[{i + 1}]" for i in order)
    return answer


def drive(method: Repair, rerank, budget: int = 10, state: QueryState | None = None):
    """One query's generator driven the way the scheduler answers it; the ledger refuses any budget overrun."""
    state = state or QueryState(Query("q", "query"), list(FIRST), budget)
    ledger = QueryLedger(budget)

    def answer(request):
        if isinstance(request, Generate):
            assert request.role == "reranker"
            return [rerank(request.documents)]
        assert isinstance(request, EncodeQuery) and request.role == "step_encoder"
        return STEP_VECTORS[request.text]

    ranking, requests = drive_search(method.search(state), answer, ledger)
    return ranking, [r.documents for r in requests if isinstance(r, Generate)], ledger, state.trace


def test_an_under_supported_step_brings_in_its_neighbours():
    ranking, windows, ledger, trace = drive(make_repair(), planner(["alpha", "beta"]))
    assert windows[0] == (0, 1, 2, 3)  # the first window: the first stage's top w
    expansion = trace["expansions"][0]
    assert expansion["target_step"] == 1 and expansion["step"] == "beta"  # support: alpha 0.69 > beta 0.5
    assert windows[1][:3] == (0, 1, 8)  # kept 0 and 1, then the bridge: 0's neighbour closest to "beta"
    assert expansion["from_graph"] == 1 and expansion["from_first_stage"] == 1
    assert 10 not in ranking and 11 not in ranking  # not a neighbour / a neighbour of a dropped document
    assert len(ledger.reranked) == trace["budget_used"] == 8 and sorted(ranking) == sorted(
        {d for w in windows for d in w}
    )


def test_a_supported_step_does_not_expand_towards_the_bridge():
    """With a plan of the supported step only, the expansion follows that step (9), never the bridge (8)."""
    ranking, windows, _, trace = drive(make_repair(), planner(["alpha"]))
    assert {e["target_step"] for e in trace["expansions"]} == {0}
    assert 9 in windows[1] and 8 not in ranking


def test_no_plan_no_expansion():
    """Answers without a readable plan refill from the first stage only, and each is counted."""
    ranking, windows, _, trace = drive(make_repair(), planner([]))
    assert trace["expansions"] == [] and trace["unreadable"] == {"plan": len(windows)}
    assert set(ranking) <= set(FIRST)


def test_expansion_waits_for_its_window():
    _, windows, _, trace = drive(make_repair(expand_from=3), planner(["alpha", "beta"]))
    assert windows[1] == (0, 1, 2, 3)[:2] + (4, 5)  # window 2 still refills from the first stage
    assert trace["expansions"][0]["window"] == 3 and 8 in windows[2]


def test_graph_candidates_only_and_no_revisits():
    _, windows, _, trace = drive(make_repair(candidates="graph", revisit=False), planner(["alpha", "beta"]))
    assert windows[1] == (0, 1, 8, 9)  # only the neighbours of the kept documents
    shown = [d for w in windows for d in w[2:]]
    assert len(shown) == len(set(shown))  # no document comes back


def test_revisit_lets_a_shown_neighbour_return_without_spending_budget():
    """The authors' code removes only the kept documents from the candidates: a document the reranker
    dropped in an earlier window may come back when the target step wants it, costing no budget again."""
    _, windows, ledger, trace = drive(make_repair(candidates="graph", revisit=True, budget=12),
                                      planner(["alpha", "beta"]), budget=12)
    assert windows[1] == (0, 1, 8, 9) and windows[2] == (0, 1, 8, 9)  # 8 and 9 are shown again in window 3
    assert trace["expansions"][1]["revisited"] == 2 and len(ledger.reranked) == trace["budget_used"] == 6
    once_only = make_repair(candidates="graph", revisit=False, budget=12)
    _, once, _, _ = drive(once_only, planner(["alpha", "beta"]), budget=12)
    assert len(once) == 2  # without revisits the neighbours run out after one expansion


def test_an_unreadable_ranking_keeps_the_window_order_and_is_counted():
    state = QueryState(Query("q", "query"), list(FIRST), 10)
    _, windows, _, trace = drive(make_repair(), lambda rows: "Step 1: alpha\nI cannot decide.", state=state)
    assert trace["unreadable"] == {"ranking": len(windows)}
    assert state.answer_problems == [("reranker", "unreadable")] * len(windows)  # in the ledger too
    assert windows[1][:2] == (0, 1)  # the identity keeps the window's first two


def test_budget_sets_the_number_of_windows():
    assert make_repair(budget=100, window=20, keep=10).window_count(100) == 9  # 20 + 8 x 10 (the code's 9 windows)
    assert make_repair().window_count(10) == 4


def test_step_signals_by_hand():
    verdicts = Verdicts()
    verdicts.record([1, 2], [1, 2, 3])  # 1 beats 2 and 3; 2 beats 3
    assert verdicts.probability(1, 2) == pytest.approx(math.e / (math.e + 1))
    assert ndcg([2, 1], {1: 2.0, 2: 1.0}, 2) == pytest.approx((1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3)))
    # step 0 agrees with the reranker (orders 1 above 2), step 1 reverses it
    sims = np.array([[0.9, 0.8, 0.0], [0.1, 0.2, 0.0]])
    signals = step_signals(sims, [1, 2, 3], [1, 2], verdicts, alpha=1.0, beta=1.0)
    assert signals.contribution[0] == 1.0 and signals.consistency[0] > 0.5 > signals.consistency[1]
    # s = support - contribution - consistency: step 0 is better supported (0.70 vs 0.54) but drives the order
    #   (nDCG 1 vs 0.86) and agrees with the verdicts (0.73 vs 0.27): -1.03 vs -0.59, so step 0 is the target
    assert signals.target == 0
    assert step_signals(sims, [1, 2, 3], [1, 2], verdicts, alpha=0.0, beta=0.0).target == 1  # support alone


def test_plan_reader():
    answer = read_plan("<think>Step 9: scratch</think>[Reasoning Trace]\nStep 1: a\nStep 2:  b \n[Document "
                       "Ranking]\n[2] > [1]")
    assert answer.steps == ("a", "b") and answer.has_ranking


def test_registered():
    assert get_method("repair") is Repair


# ---- end to end: the CLI, the scheduler and the ledger, with a scripted planner behind the generator role ----------
class KeywordPlanner:
    """A scripted planning reranker: its plan is the query's words, one step each, and it ranks the window by the
    share of query words a passage contains, in the reasoning prompt's answer format (plain layout)."""

    name = "keyword-planner"

    def generate(self, chats):
        from garen_infer.llm.types import Completion

        out = []
        for chat in chats:
            user = chat[-1]["content"]
            query = user.split("[Query] ", 1)[1].split("\n", 1)[0]
            words = set(query.lower().split())
            passages = re.findall(r"^\[(\d+)\] (.*)$", user.split("[Documents]\n", 1)[1], re.MULTILINE)
            order = sorted(passages, key=lambda p: -len(words & set(p[1].lower().split())))
            plan = "".join(f"Step {n}: {w}\n" for n, w in enumerate(sorted(words), start=1))
            text = f"[Reasoning Trace]\n{plan}[Document Ranking]\n" + " > ".join(f"[{i}]" for i, _ in order)
            out.append(Completion(text=text, input_tokens=len(user.split()), output_tokens=len(text.split())))
        return out


def test_run_repair_through_the_cli(tiny_index, beir_dir, tmp_path, monkeypatch, capsys):
    from garen_infer.doors.cli import main
    from garen_infer.llm import roles

    monkeypatch.setattr(roles, "build_roles", lambda *args, **kwargs: roles.Roles(generator=KeywordPlanner()))
    out = tmp_path / "run"
    code = main(["run", "--dataset", f"beir:{beir_dir}", "--preset", "cpu-default", "--index", str(tiny_index.path),
                 "--method", "repair", "--set", "models.generator={backend: transformers, model: scripted}",
                 "--set", "methods.repair={window: 4, keep: 2, expand_from: 2, prompt_text: plain}",
                 "--budget", "8", "--out", str(out), "--no-cache"])
    assert code == 0, capsys.readouterr().err
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["queries"] == 4 and metrics["repair_expansions_per_query"] == 2  # windows 2 and 3 expand
    assert metrics["repair_unreadable_rankings"] == metrics["repair_unreadable_plans"] == 0
    for record in (json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()):
        ledger, trace = record["ledger"], record["trace"]
        assert ledger["roles"]["reranker"]["model_calls"] == trace["windows"] == 3
        assert ledger["roles"]["step_encoder"]["model_calls"] > 0 and ledger["budget_used"] <= 8
        assert all(e["step"] in record_query_words(beir_dir, record["qid"]) for e in trace["expansions"])
        assert len(record["ranking"]) == len(set(record["ranking"])) == ledger["budget_used"]


def record_query_words(beir_dir, qid: str) -> set[str]:
    queries = {q["_id"]: q["text"] for q in map(json.loads, (beir_dir / "queries.jsonl").read_text().splitlines())}
    return set(queries[qid].lower().split())


def test_the_simulated_planner_plans_from_the_judgments_and_says_so(tiny_dataset, tiny_index, beir_dir,
                                                                    tmp_path, capsys):
    """models.generator {backend: oracle}: the plan is the judged documents' first words, the ranking the oracle
    reranker's; the run is labelled SIMULATED like every oracle run."""
    from garen_infer.doors.cli import main

    out = tmp_path / "run"
    code = main(["run", "--dataset", f"beir:{beir_dir}", "--preset", "cpu-default", "--index", str(tiny_index.path),
                 "--method", "repair", "--set", "models.generator={backend: oracle, sigma: 0.0}",
                 "--set", "methods.repair={window: 4, keep: 2, expand_from: 2}", "--budget", "8", "--out",
                 str(out), "--no-cache"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "SIMULATED RUN" in captured.err + captured.out
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["simulation"]["roles"]["generator"]["sigma"] == 0.0 and metrics["repair_unreadable_plans"] == 0
    records = {r["qid"]: r for r in map(json.loads, (out / "trace.jsonl").read_text().splitlines())}
    q4 = records["q4"]  # one judged document, py3
    assert q4["trace"]["plans"][0] == [
        " ".join(tiny_dataset.documents[tiny_dataset.doc_index["py3"]].full_text.split()[:32])
    ]
    assert q4["ranking"][0] == "py3"  # sigma 0: the judged document leads every window it is in
