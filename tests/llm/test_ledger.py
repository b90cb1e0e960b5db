"""The per-query ledger (Reranker@k: distinct documents sent to the reranker) and one conformance test that every
method passes: budget respected, no excluded id in the run, strictly decreasing scores, deterministic."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from garen_infer.configuration.presets import load_preset
from garen_infer.errors import GarenError
from garen_infer.llm.ledger import BudgetExceeded, QueryLedger
from garen_infer.llm.requests import Rerank
from garen_infer.llm.types import Completion
from garen_infer.methods.base import QueryState, get_method


# ---- QueryLedger -----------------------------------------------------------------------------------------------
def test_admit_counts_distinct_documents():
    ledger = QueryLedger(budget=5)
    ledger.admit_documents([1, 2, 3])
    ledger.admit_documents([2, 3, 4])  # 2 and 3 were already reranked: re-sending them is free
    assert ledger.reranked == {1, 2, 3, 4}
    ledger.admit_documents([1, 2, 3, 4])
    ledger.admit_documents([4, 5])
    assert len(ledger.reranked) == 5


def test_admit_refuses_before_exceeding_the_budget():
    ledger = QueryLedger(budget=5)
    ledger.admit_documents([1, 2, 3, 4])
    with pytest.raises(BudgetExceeded, match="4 of 5 used"):
        ledger.admit_documents([3, 4, 5, 6])  # two new documents, one slot left
    assert ledger.reranked == {1, 2, 3, 4}  # a refused request spends nothing
    ledger.admit_documents([5])
    assert ledger.summary()["budget_used"] == 5
    assert isinstance(BudgetExceeded("x"), GarenError)


def test_unlimited_budget():
    ledger = QueryLedger()
    ledger.admit_documents(range(10_000))
    assert ledger.summary()["budget_used"] == 10_000 and ledger.summary()["budget"] is None


def test_record_sums_per_role():
    ledger = QueryLedger(budget=100)
    ledger.record("reranker", Completion(text="[1] > [2]", input_tokens=100, output_tokens=10, seconds=0.5))
    ledger.record("reranker", Completion(text="[2] > [1]", input_tokens=120, output_tokens=12, cached=True,
                                         truncated_tokens=40))
    ledger.record("navigator", Completion(score=0.9, input_tokens=30, output_tokens=1, seconds=0.25))
    summary = ledger.summary()
    assert summary["roles"]["reranker"] == {
        "requests": 2, "model_calls": 1, "cache_hits": 1, "input_tokens": 220, "output_tokens": 22, "seconds": 0.5,
        "truncated_prompts": 1, "truncated_tokens": 40,  # a replayed answer to a cut prompt is still one
        "problems": {},
    }
    assert (summary["truncated_prompts"], summary["truncated_tokens"]) == (1, 40)
    assert summary["roles"]["navigator"]["model_calls"] == 1
    assert (summary["requests"], summary["model_calls"], summary["cache_hits"]) == (3, 2, 1)
    assert (summary["input_tokens"], summary["output_tokens"], summary["model_seconds"]) == (250, 23, 0.75)


def test_record_counts_each_answer_problem_per_role():
    ledger = QueryLedger()
    ledger.record("reranker", Completion(text="I cannot rank these.", problems=["unreadable"]))
    ledger.record("reranker", Completion(text="[2] > [1", finish_reason="length",
                                         problems=["ids_missing", "ids_appended"]))
    ledger.record("reranker", Completion(text="<think>[1]", finish_reason="length",
                                         problems=["thought_without_answer"], cached=True))
    ledger.record("agent", Completion(text="", problems=["tool_call_recovered", "retry:429"]))
    summary = ledger.summary()
    assert summary["roles"]["reranker"]["problems"] == {
        "cut_at_max_tokens": 2, "ids_appended": 1, "ids_missing": 1, "thought_without_answer": 1, "unreadable": 1}
    assert summary["problems"]["retry:429"] == 1 and summary["problems"]["cut_at_max_tokens"] == 2


def test_run_metrics_and_end_line_count_answers_and_warn_over_the_share():
    from garen_infer.running.results import answer_problems, answer_problems_report

    ledgers = [{"roles": {"reranker": {"requests": 4, "problems": {"unreadable": 1}}, "navigator": {"requests": 9}}},
               {"roles": {"reranker": {"requests": 6, "problems": {"ids_missing": 2, "unreadable": 1}}}}]
    metrics = answer_problems(ledgers)
    assert metrics == {"answer_problems": {"ids_missing": 2, "unreadable": 2},
                       "answer_problems_by_role": {"reranker": {"answers": 10, "ids_missing": 2, "unreadable": 2}}}
    quiet, loud = answer_problems_report(metrics, 0.25), answer_problems_report(metrics, 0.1)
    assert quiet == ["[run] answers not used as asked: reranker ids_missing 2, unreadable 2"]
    assert len(loud) == 2 and loud[1].startswith("[run] WARNING: 2 of the 10 reranker answers (20%) gave "
                                                 "nothing usable")
    assert answer_problems_report(answer_problems([{"roles": {}}]), 0.1) == ["[run] answers not used as asked: none"]


# ---- the scheduler consults the ledger before any model call ----------------------------------------------------
class CountingReranker:
    """Keeps each window's order and remembers every window it was sent."""

    name = "counting"

    def __init__(self):
        self.windows = []

    def rerank(self, jobs):
        self.windows.extend(j.rows for j in jobs)
        return [(list(j.rows), Completion(text="")) for j in jobs]


def test_scheduler_refuses_a_window_over_budget_before_calling_the_model():
    from garen_infer.data.dataset import Query
    from garen_infer.llm.roles import Roles
    from garen_infer.running.scheduler import Scheduler

    def greedy(state):  # a buggy method: its second window brings three new documents with one slot left
        yield Rerank((0, 1, 2))
        yield Rerank((2, 3, 4, 5))
        return []

    reranker = CountingReranker()
    state = QueryState(Query("q", "text"), first_stage=list(range(10)), budget=4)
    with pytest.raises(BudgetExceeded):
        list(Scheduler(Roles(reranker=reranker)).run([state], greedy))
    assert reranker.windows == [(0, 1, 2)]


# ---- conformance: every method through runner.execute on the tiny index ----------------------------------------
BASE_METHODS = ("bm25", "rerank", "slidegar")
OPTIONAL_METHODS = ("garen", "rgs", "lattice", "lattice++")


class SpyReranker:
    """Wraps the real reranker and records the distinct documents each query sent to it."""

    def __init__(self, inner):
        self.inner, self.name = inner, inner.name
        self.seen = defaultdict(set)

    def rerank(self, jobs):
        for job in jobs:
            self.seen[job.query].update(job.rows)
        return self.inner.rerank(jobs)


def read_trec(path):
    rows = defaultdict(list)
    for line in path.read_text().splitlines():
        qid, q0, doc, rank, score, tag = line.split()
        rows[qid].append((doc, int(rank), float(score)))
    return rows


def run_method(name, budget, dataset, index, out):
    from garen_infer.configuration.presets import run_config_from
    from garen_infer.llm.cache import NoCache
    from garen_infer.llm.roles import build_roles
    from garen_infer.running.session import execute

    preset = load_preset("cpu-default")
    config = run_config_from(preset, name, budget)
    method = get_method(name)
    # every role the preset configures: a method's options may pick roles its class does not name (lattice)
    roles = build_roles(config.models, [d.full_text for d in dataset.documents], index, NoCache())
    spy = roles.reranker = SpyReranker(roles.reranker) if "reranker" in method.roles else None
    metrics = execute(dataset, index, config, out, roles=roles, log=lambda *_: None)
    return metrics, spy


@pytest.mark.parametrize("budget", range(5, 11))
@pytest.mark.parametrize("name", BASE_METHODS + OPTIONAL_METHODS)
def test_method_conformance(name, budget, tiny_dataset, tiny_index, request, tmp_path):
    method = get_method(name)
    index = tiny_index
    if not all(tiny_index.has(s) for s in method.index_stages):
        index = request.getfixturevalue("full_index")
    metrics, spy = run_method(name, budget, tiny_dataset, index, tmp_path / "a")
    takes_budget = "budget" in method.Config.__dataclass_fields__

    # budget: the reranker never saw more distinct documents than allowed, and the ledger agrees
    trace = [json.loads(line) for line in (tmp_path / "a" / "trace.jsonl").read_text().splitlines()]
    assert sorted(t["qid"] for t in trace) == ["q1", "q2", "q3", "q4"]
    for record in trace:
        used = record["ledger"]["budget_used"]
        if takes_budget:
            assert record["ledger"]["budget"] == budget and used <= budget
        query = next(q for q in tiny_dataset.queries if q.id == record["qid"])
        if spy is not None:
            assert len(spy.seen[query.text]) == used
    assert metrics["mean_budget_used"] <= (budget if takes_budget else 0)

    # the run file: every judged query, no excluded id, ranks 1..n with strictly decreasing scores
    run = read_trec(tmp_path / "a" / "run.trec")
    assert set(run) <= {"q1", "q2", "q3", "q4"}
    assert "py2" not in {doc for doc, _, _ in run["q3"]}  # q3 excludes py2
    for qid, rows in run.items():
        assert [rank for _, rank, _ in rows] == list(range(1, len(rows) + 1))
        scores = [score for _, _, score in rows]
        assert all(a > b for a, b in zip(scores, scores[1:])), (qid, scores)
        assert len({doc for doc, _, _ in rows}) == len(rows)

    # deterministic: the same configuration gives the same run file byte for byte
    run_method(name, budget, tiny_dataset, index, tmp_path / "b")
    assert (tmp_path / "a" / "run.trec").read_bytes() == (tmp_path / "b" / "run.trec").read_bytes()


def test_garen_with_the_connectivity_navigator_needs_no_navigator_model(full_index, tiny_dataset, tmp_path):
    """A variant that makes no navigator calls runs with only a reranker configured."""
    from garen_infer.configuration.presets import run_config_from
    from garen_infer.llm.cache import NoCache
    from garen_infer.running.session import execute

    preset = load_preset("cpu-default", ["methods.garen.navigator=connectivity"])
    del preset["models"]["navigator"]
    config = run_config_from(preset, "garen", 12)
    execute(tiny_dataset, full_index, config, tmp_path / "run", cache=NoCache(), log=lambda *_: None)
    ledgers = [json.loads(line)["ledger"] for line in (tmp_path / "run" / "trace.jsonl").read_text().splitlines()]
    assert ledgers and all(set(ledger["roles"]) <= {"reranker"} and ledger["budget_used"] <= 12 for ledger in ledgers)

    model_navigator = run_config_from(load_preset("cpu-default"), "garen", 12)
    del model_navigator.models["navigator"]
    with pytest.raises(GarenError, match="needs model\\(s\\) for navigator"):
        execute(tiny_dataset, full_index, model_navigator, tmp_path / "run2", cache=NoCache(), log=lambda *_: None)
