"""Drives many per-query method generators at once, event by event.

Each method's logic stays sequential inside a query: it yields a request (or a tuple of them) and waits for the
answers. The scheduler cuts every request into items (a window, a text to score, a chat) and puts them on the
queue of the engine that answers them (``running/engine_queue.py``); every engine works at once, and a query advances
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
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from garen_infer.llm.ledger import QueryLedger
from garen_infer.llm.requests import ChatWithTools, EncodeQuery, Generate, Rerank, ScoreYesNo, shown_documents
from garen_infer.llm.roles import RerankJob, Roles, ScoreJob
from garen_infer.llm.tool_calls import AssistantTurn
from garen_infer.methods.base import QueryState, Search
from garen_infer.running.engine_queue import EngineQueue, backend_of, engine_shape

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
    def __init__(self, roles: Roles, max_active: int = 16, max_batch: int = 64, tool_workers: int = 8):
        self.roles, self.max_active, self.max_batch, self.tool_workers = roles, max_active, max_batch, tool_workers

    def run(self, states: list[QueryState], start_search: Callable[[QueryState], Search]) -> Iterator[Finished]:
        """Yield each query as it finishes (not necessarily in input order)."""
        # every event comes here: (item, answer, error) from the engines' threads, (query, Finished | None, error)
        # from the tool pool once an agent's tool calls have run
        events: queue.SimpleQueue = queue.SimpleQueue()
        engines = _Engines(self.max_batch, lambda item, answer, error: events.put((item, answer, error)))
        tools = ThreadPoolExecutor(max_workers=self.tool_workers, thread_name_prefix="tools")
        waiting, active = deque(states), 0
        try:
            while waiting or active:
                while waiting and active < self.max_active:
                    state = waiting.popleft()
                    query = _Active(state, start_search(state), QueryLedger(state.budget), time.perf_counter())
                    done = self._step(query, first=True) or self._submit(query, engines)
                    if done:
                        yield done
                    else:
                        active += 1
                if not active:
                    continue
                source, outcome, error = events.get()
                if error is not None:
                    raise error
                if isinstance(source, _Active):  # its tool calls have run: send its next request
                    done = outcome or self._submit(source, engines)
                elif not self._receive(source, outcome):
                    continue
                elif any(isinstance(r, ChatWithTools) for r in source.query.requests):
                    tools.submit(self._step_in_pool, source.query, engines.local_lock, events)
                    continue
                else:
                    done = self._step(source.query) or self._submit(source.query, engines)
                if done:
                    active -= 1
                    yield done
        finally:
            engines.close()
            tools.shutdown(wait=False, cancel_futures=True)

    def _receive(self, item: _Item, answer) -> bool:
        """File one item's answer; once the query has all of its answers, record them and say so."""
        query = item.query
        value, completion = item.read(answer)
        if item.role == "reranker" and isinstance(query.requests[item.request], Rerank) and completion.scores:
            query.state.reranker_scores.update(zip(value, completion.scores))  # the run's scores (base.py)
        if item.slot is None:
            query.answers[item.request] = value
            query.completions[item.request] = [(item.role, completion)]
        else:
            query.answers[item.request][item.slot] = value
            query.completions[item.request][item.slot] = (item.role, completion)
        query.outstanding -= 1
        if query.outstanding:
            return False
        for position in sorted(range(len(query.requests)), key=lambda p: KINDS.index(type(query.requests[p]))):
            for role, completion in query.completions[position]:
                query.ledger.record(role, completion)
        return True

    def _step_in_pool(self, query: _Active, lock: threading.Lock, events: queue.SimpleQueue) -> None:
        """An agent's turn is in: its tool calls run here, off the scheduler's thread, while the engines work on
        the other conversations. They hold the local models' lock: a tool may use the index's embedder."""
        try:
            with lock:
                events.put((query, self._step(query), None))
        except BaseException as err:  # raised by the scheduler's thread
            events.put((query, None, err))

    @staticmethod
    def _step(query: _Active, first: bool = False) -> Finished | None:
        """Run the query's search to its next request, with the answers it waited for (Finished when it returns)."""
        answer = None if first else query.answers if isinstance(query.pending, tuple) else query.answers[0]
        try:
            query.pending = next(query.search) if first else query.search.send(answer)
        except StopIteration as stop:
            return Finished(query.state, list(stop.value or []), query.ledger, time.perf_counter() - query.started)
        return None

    def _submit(self, query: _Active, engines) -> Finished | None:
        """Put the query's pending request, cut into items, on the engines' queues (every request is admitted
        against the budget before any is sent)."""
        unknown = [r for r in query.requests if not isinstance(r, KINDS)]
        if unknown:
            raise TypeError(f"a method yielded {type(unknown[0]).__name__}, which is not a model request")
        for request in query.requests:  # refused before any model call would exceed the budget
            query.ledger.admit_documents(shown_documents(request))
        items = [
            item
            for position, request in enumerate(query.requests)
            for item in self._items(query, position, request)
        ]
        query.outstanding = len(items)
        query.answers = [[None] * n if n is not None else None for n in map(_item_count, query.requests)]
        query.completions = [[None] * n if n is not None else [None] for n in map(_item_count, query.requests)]
        if not items:  # e.g. scoring no texts: answered at once
            query.completions = [[] for _ in query.requests]
            return self._step(query) or self._submit(query, engines)
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
            return [
                (_Item(query, position, i, request.role, _text), generator, chat)
                for i, chat in enumerate(request.chats)
            ]
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
        self.local_lock = threading.Lock()  # the models without a backend of their own: the index's embedder, ...
        self._locks: dict[int, threading.Lock] = {0: self.local_lock}

    def queue(self, model, call: str) -> EngineQueue:
        key = (id(model), call)
        if key not in self._queues:
            shape = engine_shape(model, self.max_batch, call)
            engine = backend_of(model)
            # a local engine is called by one thread at a time; models without a backend of their own (the index's
            # embedder, the oracle, a scripted policy) count as one engine
            lock = (
                None
                if shape.lanes > 1
                else self._locks.setdefault(id(engine) if engine is not model else 0, threading.Lock())
            )
            self._queues[key] = EngineQueue(type(model).__name__, getattr(model, call), shape, self.deliver, lock,
                                            key=lambda item: item.query.state.query.id)
        return self._queues[key]

    def close(self) -> None:
        for engine in self._queues.values():
            engine.close()

