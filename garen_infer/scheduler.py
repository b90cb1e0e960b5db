"""Drives many per-query method generators at once, event by event.

Each method's logic stays sequential inside a query: it yields a request (or a tuple of them) and waits for the
answers. The scheduler cuts every request into items (a window, a text to score, a chat) and puts them on the
queue of the engine that answers them (``llm/engine_queue.py``); every engine works at once, and a query advances
as soon as its own answers are in, not when the slowest answer of a round is. A new query starts as soon as one
finishes, so up to ``max_active`` queries are in flight. Answers are recorded in the asking query's ledger in the
order a query run alone would record them, so with models whose answers do not depend on the batch (the oracle,
embeddings, a cross-encoder, a server) the results equal running the queries one by one.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterator

from garen_infer.llm.engine_queue import EngineQueue, backend_of, engine_shape
from garen_infer.llm.ledger import QueryLedger
from garen_infer.llm.requests import ChatWithTools, EncodeQuery, Generate, Rerank, ScoreYesNo
from garen_infer.llm.roles import RerankJob, Roles, ScoreJob
from garen_infer.llm.tool_calls import AssistantTurn
from garen_infer.methods.base import QueryState, Search

# the order a query's answers are recorded in when one yield asks several things (the order of the ledger's roles)
KINDS = (EncodeQuery, Rerank, ScoreYesNo, Generate, ChatWithTools)


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
    answers: list = field(default_factory=list)  # per request: its answer, or a list with one slot per item
    completions: list = field(default_factory=list)  # per request: (role, completion) per item
    outstanding: int = 0  # items not answered yet

    @property
    def requests(self) -> tuple:
        return self.pending if isinstance(self.pending, tuple) else (self.pending,)


@dataclass(frozen=True)
class _Item:
    """One piece of a request on an engine's queue: where its answer goes and how it is read."""

    query: _Active
    request: int  # position of the request in the query's yield
    slot: int | None  # position within the request's list of answers; None: the request has one answer
    role: str
    read: Callable  # the engine's answer -> (the method's answer, its Completion)


class Scheduler:
    def __init__(self, roles: Roles, max_active: int = 16, max_batch: int = 64):
        self.roles, self.max_active, self.max_batch = roles, max_active, max_batch

    def run(self, states: list[QueryState], start_search: Callable[[QueryState], Search]) -> Iterator[Finished]:
        """Yield each query as it finishes (not necessarily in input order)."""
        answered: queue.SimpleQueue = queue.SimpleQueue()  # (item, answer, error) from every engine's threads
        engines = _Engines(self.max_batch, lambda item, answer, error: answered.put((item, answer, error)))
        waiting, active = deque(states), 0
        try:
            while waiting or active:
                while waiting and active < self.max_active:
                    state = waiting.popleft()
                    query = _Active(state, start_search(state), QueryLedger(state.budget), time.perf_counter())
                    done = self._advance(query, engines, first=True)
                    if done:
                        yield done
                    else:
                        active += 1
                if not active:
                    continue
                item, answer, error = answered.get()
                if error is not None:
                    raise error
                done = self._receive(item, answer, engines)
                if done:
                    active -= 1
                    yield done
        finally:
            engines.close()

    def _receive(self, item: _Item, answer, engines) -> Finished | None:
        """File one item's answer; once the query has all of its answers, record them and let it go on."""
        query = item.query
        value, completion = item.read(answer)
        if item.slot is None:
            query.answers[item.request] = value
            query.completions[item.request] = [(item.role, completion)]
        else:
            query.answers[item.request][item.slot] = value
            query.completions[item.request][item.slot] = (item.role, completion)
        query.outstanding -= 1
        if query.outstanding:
            return None
        for position in sorted(range(len(query.requests)), key=lambda p: KINDS.index(type(query.requests[p]))):
            for role, completion in query.completions[position]:
                query.ledger.record(role, completion)
        return self._advance(query, engines)

    def _advance(self, query: _Active, engines, first: bool = False) -> Finished | None:
        """Run the query's search to its next request (with the answers it waited for) and submit that request."""
        answer = None if first else query.answers if isinstance(query.pending, tuple) else query.answers[0]
        try:
            query.pending = next(query.search) if first else query.search.send(answer)
        except StopIteration as stop:
            return Finished(query.state, list(stop.value or []), query.ledger, time.perf_counter() - query.started)
        unknown = [r for r in query.requests if not isinstance(r, KINDS)]
        if unknown:
            raise TypeError(f"a method yielded {type(unknown[0]).__name__}, which is not a model request")
        for request in query.requests:  # every request is admitted before any is sent, as the budget requires
            rows = request.rows if isinstance(request, Rerank) else getattr(request, "documents", ())
            if isinstance(request, (Rerank, ScoreYesNo, Generate)):
                query.ledger.admit_documents(rows)  # refuses before any model call would exceed the budget
        items = [item for position, request in enumerate(query.requests) for item in self._items(query, position, request)]
        query.outstanding = len(items)
        query.answers = [[None] * n if n is not None else None for n in map(_item_count, query.requests)]
        query.completions = [[None] * n if n is not None else [None] for n in map(_item_count, query.requests)]
        if not items:  # e.g. scoring no texts: answered at once
            for position, request in enumerate(query.requests):
                query.answers[position], query.completions[position] = [], []
            return self._advance(query, engines)
        for item, (model, call), payload in items:
            engines.queue(model, call).put(item, payload)
        return None

    def _items(self, query: _Active, position: int, request) -> list[tuple[_Item, tuple[object, str], object]]:
        """The request's items: (where its answer goes, the role's model and the method that answers, its input)."""
        q = query.state.query
        if isinstance(request, EncodeQuery):
            return [(_Item(query, position, None, request.role, _pair), (self.roles.encoder(), "encode"), request.text)]
        if isinstance(request, Rerank):
            job = RerankJob(q.text, request.rows, q.id)
            return [(_Item(query, position, None, "reranker", _pair), (self.roles.reranker, "rerank"), job)]
        if isinstance(request, ScoreYesNo):
            scorer = (self.roles.scorer(request.role), "score")
            return [(_Item(query, position, i, request.role, _score), scorer,
                     ScoreJob(q.text, text, q.id, request.rows[i] if request.rows else (), request.by_documents))
                    for i, text in enumerate(request.texts)]
        if isinstance(request, Generate):
            generator = (self.roles.generator, "generate")
            return [(_Item(query, position, i, request.role, _text), generator, chat) for i, chat in enumerate(request.chats)]
        turn = (list(request.chat), list(request.tools))
        return [(_Item(query, position, None, request.role, _turn), (self.roles.agent_model(), "chat"), turn)]


def _item_count(request) -> int | None:
    """How many answers a request's list holds (None: one answer, not a list)."""
    if isinstance(request, ScoreYesNo):
        return len(request.texts)
    if isinstance(request, Generate):
        return len(request.chats)
    return None


def _pair(answer):  # (answer, completion), as encoders and rerankers give them
    return answer


def _score(completion):
    return completion.score, completion


def _text(completion):
    return completion.text, completion


def _turn(completion):
    return AssistantTurn.from_completion(completion), completion


class _Engines:
    """One queue per role model; models that share a local engine share its lock."""

    def __init__(self, max_batch: int, deliver: Callable):
        self.max_batch, self.deliver = max_batch, deliver
        self._queues: dict[tuple[int, str], EngineQueue] = {}
        self._locks: dict[int, threading.Lock] = {}

    def queue(self, model, call: str) -> EngineQueue:
        key = (id(model), call)
        if key not in self._queues:
            shape = engine_shape(model, self.max_batch)
            engine = backend_of(model)
            # a local engine is called by one thread at a time; models without a backend of their own (the index's
            # embedder, the oracle, a scripted policy) count as one engine
            lock = None if shape.lanes > 1 else self._locks.setdefault(id(engine) if engine is not model else 0, threading.Lock())
            self._queues[key] = EngineQueue(type(model).__name__, getattr(model, call), shape, self.deliver, lock)
        return self._queues[key]

    def close(self) -> None:
        for engine in self._queues.values():
            engine.close()

