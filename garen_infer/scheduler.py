"""Drives many per-query method generators at once and answers their requests in batches per role.

Each method's logic stays sequential inside a query; across queries the requests of one round are merged, so
an engine sees full batches (up to ``max_batch`` items per backend call). Every answer is recorded in the asking
query's ledger. With deterministic models the results equal running the queries one by one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from garen_infer.llm.ledger import QueryLedger
from garen_infer.llm.requests import ChatWithTools, EncodeQuery, Generate, Rerank, ScoreYesNo
from garen_infer.llm.roles import RerankJob, Roles, ScoreJob
from garen_infer.llm.tool_calls import AssistantTurn
from garen_infer.methods.base import QueryState, Search


@dataclass
class Finished:
    state: QueryState
    ranking: list[int]
    ledger: QueryLedger
    seconds: float


@dataclass
class _Active:
    state: QueryState
    search: Search
    ledger: QueryLedger
    started: float
    pending: object = None  # the request (or tuple of requests) awaiting an answer
    answers: list = field(default_factory=list)


def _chunks(items: list, size: int) -> Iterator[list]:
    for start in range(0, len(items), max(size, 1)):
        yield items[start : start + size]


class Scheduler:
    def __init__(self, roles: Roles, max_active: int = 16, max_batch: int = 64):
        self.roles, self.max_active, self.max_batch = roles, max_active, max_batch

    def run(self, states: list[QueryState], start_search: Callable[[QueryState], Search]) -> Iterator[Finished]:
        """Yield each query as it finishes (not necessarily in input order)."""
        waiting = list(reversed(states))
        active: list[_Active] = []
        while waiting or active:
            while waiting and len(active) < self.max_active:
                state = waiting.pop()
                item = _Active(state, start_search(state), QueryLedger(state.budget), time.perf_counter())
                done = self._advance(item, None)
                if done:
                    yield done
                else:
                    active.append(item)
            self._answer_round(active)
            still = []
            for item in active:
                done = self._advance(item, item.answers if isinstance(item.pending, tuple) else item.answers[0])
                if done:
                    yield done
                else:
                    still.append(item)
            active = still

    @staticmethod
    def _advance(item: _Active, answer) -> Finished | None:
        try:
            item.pending = item.search.send(answer) if answer is not None else next(item.search)
        except StopIteration as stop:
            return Finished(item.state, list(stop.value or []), item.ledger, time.perf_counter() - item.started)
        item.answers = []
        return None

    def _answer_round(self, active: list[_Active]) -> None:
        """Answer every pending request of this round, batched by role."""
        slots = []  # (item, position, request)
        for item in active:
            requests = item.pending if isinstance(item.pending, tuple) else (item.pending,)
            item.answers = [None] * len(requests)
            slots.extend((item, pos, req) for pos, req in enumerate(requests))
        for kind in (EncodeQuery, Rerank, ScoreYesNo, Generate, ChatWithTools):
            group = [s for s in slots if isinstance(s[2], kind)]
            if not group:
                continue
            if kind is EncodeQuery:
                self._encode(group)
            elif kind is Rerank:
                self._rerank(group)
            elif kind is ScoreYesNo:
                for role in dict.fromkeys(s[2].role for s in group):
                    self._score(role, [s for s in group if s[2].role == role])
            elif kind is Generate:
                self._generate(group)
            else:
                self._chat_with_tools(group)
        unknown = [s for s in slots if not isinstance(s[2], (EncodeQuery, Rerank, ScoreYesNo, Generate, ChatWithTools))]
        if unknown:
            raise TypeError(f"a method yielded {type(unknown[0][2]).__name__}, which is not a model request")

    def _encode(self, group) -> None:
        for chunk in _chunks(group, self.max_batch):
            answers = self.roles.encoder().encode([req.text for _, _, req in chunk])
            for (item, pos, req), (vector, completion) in zip(chunk, answers):
                item.ledger.record(req.role, completion)
                item.answers[pos] = vector

    def _rerank(self, group) -> None:
        for item, _, req in group:
            item.ledger.admit_documents(req.rows)  # refuses before any model call would exceed the budget
        for chunk in _chunks(group, self.max_batch):
            jobs = [RerankJob(item.state.query.text, req.rows, item.state.query.id) for item, _, req in chunk]
            for (item, pos, _), (order, completion) in zip(chunk, self.roles.reranker.rerank(jobs)):
                item.ledger.record("reranker", completion)
                item.answers[pos] = order

    def _score(self, role: str, group) -> None:
        scorer = self.roles.scorer(role)
        for item, pos, req in group:
            item.ledger.admit_documents(req.documents)  # refuses before any model call would exceed the budget
            item.answers[pos] = []
        flat = [(item, pos, ScoreJob(item.state.query.text, text, item.state.query.id, req.rows[i] if req.rows else (),
                         req.by_documents))
                for item, pos, req in group for i, text in enumerate(req.texts)]
        for chunk in _chunks(flat, self.max_batch):
            completions = scorer.score([job for _, _, job in chunk])
            for (item, pos, _), completion in zip(chunk, completions):
                item.ledger.record(role, completion)
                item.answers[pos].append(completion.score)

    def _generate(self, group) -> None:
        for item, pos, req in group:
            item.ledger.admit_documents(req.documents)
            item.answers[pos] = []
        flat = [(item, pos, chat, req.role) for item, pos, req in group for chat in req.chats]
        for chunk in _chunks(flat, self.max_batch):
            completions = self.roles.generator.generate([chat for _, _, chat, _ in chunk])
            for (item, pos, _, role), completion in zip(chunk, completions):
                item.ledger.record(role, completion)
                item.answers[pos].append(completion.text)

    def _chat_with_tools(self, group) -> None:
        for chunk in _chunks(group, self.max_batch):
            completions = self.roles.agent_model().chat([(list(req.chat), list(req.tools)) for _, _, req in chunk])
            for (item, pos, req), completion in zip(chunk, completions):
                item.ledger.record(req.role, completion)
                item.answers[pos] = AssistantTurn.from_completion(completion)
