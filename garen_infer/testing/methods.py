"""Testing a retrieval method: drive its per-query generator by hand, answer it with a scripted reranker and
scorer whose answers can be computed by hand, and check the contract every method keeps.

    from garen_infer.testing.methods import drive, scripted_answers

    answer = scripted_answers({3: 2.0, 7: 1.0})
    ranking, requests = drive(method.search(state), answer, QueryLedger(budget))

``ScriptedReranker`` and ``ScriptedScorer`` play the same model as roles of a whole run (``Roles``).

The contract (``check_method_contract``), run through the real runner, scheduler and ledger on a dataset of
yours: every query's reranked documents stay within the budget, ``run.trec``'s scores strictly decrease down
each ranking with no document twice and no excluded id, and a second run writes the same ``run.trec`` byte
for byte. ``tests/methods/test_method_contract.py`` holds every registered method to it; a new method's test can too.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from garen_infer.llm.requests import EncodeQuery, Generate, Rerank, ScoreYesNo, shown_documents
from garen_infer.llm.types import Completion
from garen_infer.methods.base import Search

Answer = Callable[[Any], Any]  # one request -> its answer, as the scheduler would send it back


def drive(search: Search, answer: Answer, ledger=None) -> tuple[list[int], list]:
    """Run one query's search to its end as the scheduler does: each request (or each request of a tuple
    yielded together) answered by ``answer``; with a ``QueryLedger``, the documents each one shows are
    admitted first, so an overrun of the budget raises ``BudgetExceeded`` as in a run. Returns (ranking,
    requests), the requests one by one in the order they were yielded."""
    requests: list = []
    try:
        pending = next(search)
        while True:
            batch = pending if isinstance(pending, tuple) else (pending,)
            if ledger is not None:
                for request in batch:
                    ledger.admit_documents(shown_documents(request))
            requests.extend(batch)
            answers = [answer(request) for request in batch]
            pending = search.send(answers if isinstance(pending, tuple) else answers[0])
    except StopIteration as stop:
        return stop.value, requests


def scripted_answers(relevance: Mapping[int, float], texts: Mapping[str, float] | None = None,
                     generate: Answer | None = None, encode: Answer | None = None) -> Answer:
    """A scripted model: a ``Rerank`` is answered with its rows by ``relevance`` (higher first, ties in the
    window's order), a ``ScoreYesNo`` item scores ``texts[text]`` when given, else the best relevance of its
    rows (0 for none); ``Generate`` and ``EncodeQuery`` go to ``generate`` and ``encode``, and any other
    request fails the test."""

    def answer(request):
        if isinstance(request, Rerank):
            return sorted(request.rows, key=lambda row: -relevance.get(row, 0.0))
        if isinstance(request, ScoreYesNo):
            if texts is not None:
                return [texts.get(text, 0.0) for text in request.texts]
            return [best(relevance, rows) for rows in request.rows]
        if isinstance(request, Generate) and generate is not None:
            return generate(request)
        if isinstance(request, EncodeQuery) and encode is not None:
            return encode(request)
        raise AssertionError(f"the scripted model was not told how to answer {request!r}")

    return answer


def best(relevance: Mapping[int, float], rows) -> float:
    return max((relevance.get(row, 0.0) for row in rows), default=0.0)


class ScriptedReranker:
    """The reranker role of a run (``Roles(reranker=ScriptedReranker(relevance))``): each window by
    ``relevance[row]``, higher first, ties in the window's order; keeps the windows it was asked about."""

    name = "scripted"

    def __init__(self, relevance: Mapping[int, float]):
        self.relevance = relevance
        self.windows: list[tuple[int, ...]] = []

    def rerank(self, jobs) -> list[tuple[list[int], Completion]]:
        out = []
        for job in jobs:
            self.windows.append(job.rows)
            order = sorted(range(len(job.rows)), key=lambda i: -self.relevance.get(job.rows[i], 0.0))
            answer = " > ".join(f"[{i + 1}]" for i in order)
            out.append(([job.rows[i] for i in order], Completion(text=answer)))
        return out


class ScriptedScorer:
    """A yes/no scorer role (``Roles(scorers={"navigator": ScriptedScorer(texts)})``): each text's score from
    ``texts``, else the best ``relevance`` of the rows it stands for, else 0."""

    name = "scripted"

    def __init__(self, texts: Mapping[str, float] | None = None,
                 relevance: Mapping[int, float] | None = None):
        self.texts, self.relevance = texts or {}, relevance or {}

    def score(self, jobs) -> list[Completion]:
        return [Completion(score=self.texts.get(job.text, best(self.relevance, job.rows))) for job in jobs]


def check_method_contract(dataset, index, config, out: str | Path, roles=None,
                          drops_excluded: bool = True) -> dict:
    """Run ``config`` (a ``RunConfig``) twice over ``dataset`` on ``index``, into ``out``/first and
    ``out``/second, and assert the contract of the module docstring; returns the first run's trace records
    by query id. ``roles``: the models, as ``execute`` takes them (the preset's are built otherwise).
    ``drops_excluded``: the method's own ranking holds no excluded id either (False for a method that may
    return one, a graph neighbour or an agent's answer: the runner removes it before ``run.trec``)."""
    from garen_infer.llm.cache import NoCache
    from garen_infer.running.session import execute
    from garen_infer.storage.trec import read_run

    out = Path(out)
    quiet = dict(roles=roles, cache=NoCache(), log=lambda *_: None)
    execute(dataset, index, config, out / "first", **quiet)
    execute(dataset, index, replace(config, max_active_queries=1), out / "second", **quiet)
    trace = (out / "first" / "trace.jsonl").read_text(encoding="utf-8").splitlines()
    records = {record["qid"]: record for record in map(json.loads, trace)}
    for query in dataset.judged_queries():
        record = records[query.id]
        used = record["ledger"]["budget_used"]
        budget = config.budget
        assert budget is None or used <= budget, f"{query.id}: {used} documents reranked, budget {budget}"
        if drops_excluded:
            shown = set(query.excluded_ids) & set(record["ranking"])
            assert not shown, f"{query.id}: excluded ids returned: {sorted(shown)}"
        assert len(set(record["ranking"])) == len(record["ranking"]), f"{query.id}: a document ranked twice"
    excluded = {q.id: q.excluded_ids for q in dataset.queries}
    for qid, scored in read_run(out / "first" / "run.trec").items():
        scores = list(scored.values())
        decreasing = all(a > b for a, b in zip(scores, scores[1:]))
        assert decreasing, f"{qid}: run.trec's scores do not strictly decrease"
        assert not set(scored) & excluded[qid], f"{qid}: run.trec holds an excluded id"
    first, second = (out / "first" / "run.trec").read_bytes(), (out / "second" / "run.trec").read_bytes()
    assert first == second, "a second run of the same configuration wrote another run.trec"
    return records
