"""The event-driven scheduler at its defaults (16 queries at once, 64 items per backend call, as RunConfig's):
every answer goes back to the query and the request position that asked; a query advances on its own answers, not
with a round; a new query starts as one finishes; engines work at the same time; a server's slots are refilled as
each answer returns; a model's failure is raised as it is."""

from __future__ import annotations

import threading
import time

import pytest

from garen_infer.data.dataset import Query
from garen_infer.errors import GarenError
from garen_infer.llm.requests import Rerank, ScoreYesNo
from garen_infer.llm.roles import LLMListwiseReranker, Roles
from garen_infer.llm.types import Completion
from garen_infer.methods.base import QueryState
from garen_infer.running.engine_queue import EngineQueue
from garen_infer.running.runner import RunConfig
from garen_infer.running.scheduler import Scheduler

QUERIES = 20  # more than the 16 active at once: the last 4 start as the first ones finish
WAIT = 10.0  # seconds a test double waits for what must happen before it gives up (a failure, not a hang)


class EchoScorer:
    """The model's stand-in: the score names the query and the text it was asked about (query 7, text 12: 7012)."""

    def __init__(self):
        self.calls: list[list[str]] = []  # the query ids of each call, in order
        self.lock = threading.Lock()

    def score(self, jobs):
        with self.lock:
            self.calls.append([job.query_id for job in jobs])
        return [Completion(score=float(int(job.query_id[1:]) * 1000 + int(job.text[1:]))) for job in jobs]


class Server:
    """A server's transport as the scheduler sees it: how many requests it takes at once."""

    def __init__(self, slots: int):
        self.requests_at_once = slots


def states(n: int = QUERIES) -> list[QueryState]:
    return [QueryState(Query(f"q{i}", f"query {i}"), [], None) for i in range(n)]


def search(state: QueryState):
    """Two requests at once (30 texts for the navigator, 9 for another role), then one more for the navigator."""
    first, other = yield (ScoreYesNo(tuple(f"t{i}" for i in range(30))),
                          ScoreYesNo(tuple(f"t{i}" for i in range(30, 39)), role="verifier"))
    last = yield ScoreYesNo(("t39",))
    state.trace["answers"] = [first, other, last]
    return []


def test_every_answer_finds_its_query_and_no_call_carries_more_than_64():
    navigator, verifier = EchoScorer(), EchoScorer()
    scheduler = Scheduler(Roles(scorers={"navigator": navigator, "verifier": verifier}))
    assert (scheduler.max_active, scheduler.max_batch) == (RunConfig.max_active_queries,
                                                           RunConfig.max_batch) == (16, 64)
    finished = list(scheduler.run(states(), search))

    assert sorted(f.state.query.id for f in finished) == sorted(s.query.id for s in states())
    for f in finished:
        n = int(f.state.query.id[1:]) * 1000
        assert f.state.trace["answers"] == [[n + i for i in range(30)], [n + i for i in range(30, 39)], [n + 39]]
        assert f.ledger.roles["navigator"].requests == 31 and f.ledger.roles["verifier"].requests == 9
        assert list(f.ledger.roles) == ["navigator", "verifier"]  # recorded in the order a query alone records them
    assert max(len(call) for call in navigator.calls + verifier.calls) <= 64
    assert sum(map(len, navigator.calls)) == QUERIES * 31 and sum(map(len, verifier.calls)) == QUERIES * 9
    assert len(set().union(*navigator.calls[:1])) <= 16


class HeldScorer(EchoScorer):
    """Holds the answer about query q0 until every other query has finished (``released``)."""

    def __init__(self, slots: int):
        super().__init__()
        self.backend, self.released = Server(slots), threading.Event()

    def score(self, jobs):
        if any(job.query_id == "q0" for job in jobs):
            assert self.released.wait(WAIT), "the held answer stalled the other queries"
        return super().score(jobs)


def test_a_slow_answer_stalls_only_its_own_query():
    scorer, order = HeldScorer(slots=4), []
    for f in Scheduler(Roles(scorers={"navigator": scorer}), max_active=4).run(states(8), one_text):
        order.append(f.state.query.id)
        if len(order) == 7:  # every query but q0 is done while q0 still waits for its first answer
            scorer.released.set()
    assert order[-1] == "q0" and len(order) == 8


def one_text(state: QueryState):
    yield ScoreYesNo(("t1",))
    yield ScoreYesNo(("t2",))
    return []


def test_a_new_query_starts_as_one_finishes_and_no_more_than_max_active_are_in_flight():
    scorer = EchoScorer()
    in_flight, most = set(), [0]

    def tracked(state):
        in_flight.add(state.query.id)
        most[0] = max(most[0], len(in_flight))
        yield from one_text(state)
        in_flight.discard(state.query.id)
        return []

    finished = list(Scheduler(Roles(scorers={"navigator": scorer}), max_active=3).run(states(10), tracked))
    assert len(finished) == 10 and most[0] == 3


class Overlap:
    """Two engines (a reranker and a navigator on models of their own) that each wait, inside their call, for the
    other's call to begin: they pass only if both work at once (a scheduler that answers one role after the other
    would make the first one give up)."""

    def __init__(self):
        self.reranking, self.scoring = threading.Event(), threading.Event()
        self.reranker = type("Reranker", (), {"backend": Server(1), "rerank": lambda _, jobs: self.rerank(jobs)})()
        self.navigator = type("Navigator", (), {"backend": Server(1), "score": lambda _, jobs: self.score(jobs)})()

    def rerank(self, jobs):
        self.reranking.set()
        assert self.scoring.wait(WAIT), "the navigator's engine did not start while the reranker's worked"
        return [(list(job.rows), Completion()) for job in jobs]

    def score(self, jobs):
        self.scoring.set()
        assert self.reranking.wait(WAIT), "the reranker's engine did not start while the navigator's worked"
        return [Completion(score=0.5) for _ in jobs]


def test_the_reranker_and_the_navigator_work_at_once():
    overlap = Overlap()

    def both(state):
        order, scores = yield (Rerank((1, 2, 3)), ScoreYesNo(("t",)))
        return order

    finished = list(
        Scheduler(Roles(reranker=overlap.reranker, scorers={"navigator": overlap.navigator})).run(
            states(2), both
        )
    )
    assert [f.ranking for f in finished] == [[1, 2, 3]] * 2


class Slots(EchoScorer):
    """A server with ``slots`` requests in flight at most: it counts how many it holds at once."""

    def __init__(self, slots: int):
        super().__init__()
        self.backend, self.now, self.most = Server(slots), 0, 0

    def score(self, jobs):
        with self.lock:
            self.now += len(jobs)
            self.most = max(self.most, self.now)
        time.sleep(0.005)
        answers = super().score(jobs)
        with self.lock:
            self.now -= len(jobs)
        return answers


def test_a_server_is_sent_one_request_per_slot_and_kept_full():
    server = Slots(slots=5)
    finished = list(Scheduler(Roles(scorers={"navigator": server, "verifier": server})).run(states(), search))
    assert len(finished) == QUERIES
    assert {len(call) for call in server.calls} == {1}  # each request is its own call, sent when a slot frees
    assert server.most == 5  # the two roles share the server's slots, as they share its engine


class Failing(EchoScorer):
    def score(self, jobs):
        raise GarenError("the navigator's server went away")


def test_a_model_failure_is_raised_as_it_is():
    with pytest.raises(GarenError, match="went away"):
        list(Scheduler(Roles(scorers={"navigator": Failing()})).run(states(3), one_text))


def test_a_request_that_is_not_a_model_request_is_refused():
    def odd(state):
        yield "rerank these please"

    with pytest.raises(TypeError, match="not a model request"):
        list(Scheduler(Roles()).run(states(1), odd))


class Policy:
    """An agent model that ends every conversation at once (no tool call)."""

    def chat(self, requests):
        return [Completion(text="done") for _ in requests]


def test_an_agents_tool_calls_run_while_other_queries_go_on():
    """q0's tool call (after its turn) lasts until q1, a query that only scores, has had its answer, and that answer
    is given only once the tool has begun: it passes only if the tool runs off the scheduler's thread."""
    from garen_infer.llm.requests import ChatWithTools

    tool_began, q1_answered = threading.Event(), threading.Event()

    class WaitsForTheTool(EchoScorer):
        def score(self, jobs):
            assert tool_began.wait(WAIT)
            return super().score(jobs)

    def agent_or_scorer(state):
        if state.query.id == "q0":
            yield ChatWithTools(({"role": "user", "content": "find"},), ())
            tool_began.set()  # the tool's work: it waits for the other query
            assert q1_answered.wait(WAIT), "the tool call held up the other query"
            return [0]
        yield ScoreYesNo(("t1",))
        q1_answered.set()
        return [1]

    roles = Roles(scorers={"navigator": WaitsForTheTool()}, agent=Policy())
    roles.scorers["navigator"].backend = Server(1)  # its own engine, not the local models' (which the tools hold)
    finished = list(Scheduler(roles).run(states(2), agent_or_scorer))
    assert sorted(f.ranking for f in finished) == [[0], [1]]


class RecordingGenerator:
    """A generation backend's stand-in that answers every listwise prompt with the given order and keeps the size
    of each call it receives. Its first call returns only once ``others_queued()`` holds, so every other window is
    waiting when it returns, however slowly a loaded machine starts the queries."""

    id = "recording"

    def __init__(self, others_queued=None):
        self.calls: list[int] = []
        self.others_queued = others_queued

    def generate(self, chats, sampling):
        self.calls.append(len(chats))
        if len(self.calls) == 1 and self.others_queued is not None:
            deadline = time.monotonic() + 60
            while not self.others_queued():
                assert time.monotonic() < deadline, "the other queries never asked"
                time.sleep(0.01)
        return [Completion(text="[2] > [1]") for _ in chats]


def test_listwise_rerank_calls_carry_at_most_max_batch_windows(monkeypatch):
    """100 queries each asking for one window at once: the backend receives calls of at most 64 prompts (run.max_batch),
    and each query gets its own window back in the model's order."""
    queued = []  # every window the scheduler put on the reranker's queue
    put = EngineQueue.put

    def counting_put(self, unit, payload):
        put(self, unit, payload)
        queued.append(unit)

    monkeypatch.setattr(EngineQueue, "put", counting_put)
    backend = RecordingGenerator(lambda: len(queued) == 100)  # the other windows pile up behind the first call
    reranker = LLMListwiseReranker(backend, [f"document {i}" for i in range(200)])
    scheduler = Scheduler(Roles(reranker=reranker), max_active=100)

    def rerank_once(state: QueryState):
        n = int(state.query.id[1:])
        state.trace["order"] = yield Rerank((2 * n, 2 * n + 1))
        return []

    finished = list(scheduler.run([QueryState(Query(f"q{n}", f"query {n}"), [], None) for n in range(100)],
                                  rerank_once))
    assert sum(backend.calls) == 100 and max(backend.calls) == scheduler.max_batch == 64  # a full call, not more
    assert all(
        f.state.trace["order"] == [2 * int(f.state.query.id[1:]) + 1, 2 * int(f.state.query.id[1:])]
        for f in finished
    )


class YesNoServer:
    """A server's yes/no endpoint: ``slots`` requests at once, each answered after ``seconds``; it keeps
    every prompt it receives."""

    id = "test:yes-no-server"

    def __init__(self, slots: int, seconds: float):
        self.requests_at_once, self.seconds, self.prompts, self.lock = slots, seconds, [], threading.Lock()

    def score_yes_no(self, chats, assistant_prefix):
        with self.lock:
            self.prompts += [chat[-1]["content"] for chat in chats]
        time.sleep(self.seconds)
        return [Completion(score=0.5) for _ in chats]


def test_a_prompt_asked_by_several_queries_at_once_reaches_the_server_once():
    """LATTICE's slates: one query's request may hold a text twice (two documents with the same text, such
    as Cranfield's empty ones), and queries with the same text score the same documents. Each request is its
    own call to a server, from many threads; each distinct prompt is still sent once, and every query gets
    its answers."""
    from garen_infer.llm.backends import CachedBackend
    from garen_infer.llm.cache import NoCache
    from garen_infer.llm.roles import LLMYesNoScorer

    # room for all 12 items at once, answered long after every query has sent its own (a prompt asked after
    # its answer came back is sent anew)
    server = YesNoServer(slots=16, seconds=1.0)
    roles = Roles(scorers={"navigator": LLMYesNoScorer(CachedBackend(server, NoCache()))})
    queries = [QueryState(Query(f"q{i}", "wing flutter"), [], None) for i in range(3)]

    def slates(state: QueryState):
        state.trace["scores"] = yield ScoreYesNo(("d1", "d2", "d1", "d3"))
        return []

    finished = list(Scheduler(roles).run(queries, slates))
    assert [f.state.trace["scores"] for f in finished] == [[0.5] * 4] * 3
    assert len(server.prompts) == len(set(server.prompts)) == 3
    assert sum(f.ledger.summary()["model_calls"] for f in finished) == 3  # the repeats count as cache hits
