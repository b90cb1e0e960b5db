"""The scheduler at its defaults (16 queries at once, 64 items per backend call, as RunConfig's): one round's
requests from many queries are merged, cut into backend calls of at most 64 items, and every answer goes back to
the query and the request position that asked. The method tests run far below these sizes, where no call is cut
and at most a few queries are active, so a mistake at a call boundary would pass them."""

from __future__ import annotations

from garen_infer.data.dataset import Query
from garen_infer.llm.requests import Rerank, ScoreYesNo
from garen_infer.llm.roles import LLMListwiseReranker, Roles
from garen_infer.llm.types import Completion
from garen_infer.methods.base import QueryState
from garen_infer.runner import RunConfig
from garen_infer.scheduler import Scheduler

QUERIES = 20  # more than the 16 active at once: the last 4 start as the first ones finish


class EchoScorer:
    """The model's stand-in: the score names the query and the text it was asked about (query 7, text 12: 7012)."""

    def __init__(self):
        self.calls: list[list[str]] = []  # the query ids of each call, in order

    def score(self, jobs):
        self.calls.append([job.query_id for job in jobs])
        return [Completion(score=float(int(job.query_id[1:]) * 1000 + int(job.text[1:]))) for job in jobs]


def search(state: QueryState):
    """Two requests at once (30 texts for the navigator, 9 for another role), then one more for the navigator."""
    first, other = yield (ScoreYesNo(tuple(f"t{i}" for i in range(30))), ScoreYesNo(tuple(f"t{i}" for i in range(30, 39)), role="verifier"))
    last = yield ScoreYesNo(("t39",))
    state.trace["answers"] = [first, other, last]
    return []


def test_the_default_batches_are_cut_at_64_and_every_answer_finds_its_query():
    navigator, verifier = EchoScorer(), EchoScorer()
    scheduler = Scheduler(Roles(scorers={"navigator": navigator, "verifier": verifier}))
    assert (scheduler.max_active, scheduler.max_batch) == (RunConfig.max_active_queries, RunConfig.max_batch) == (16, 64)
    states = [QueryState(Query(f"q{n}", f"query {n}"), [], None) for n in range(QUERIES)]
    finished = list(scheduler.run(states, search))

    assert sorted(f.state.query.id for f in finished) == sorted(s.query.id for s in states)
    for f in finished:
        n = int(f.state.query.id[1:]) * 1000
        assert f.state.trace["answers"] == [[n + i for i in range(30)], [n + i for i in range(30, 39)], [n + 39]]
        assert f.ledger.roles["navigator"].requests == 31 and f.ledger.roles["verifier"].requests == 9

    # round 1: 16 queries x 30 texts = 480 = 7 x 64 + 32 (and 16 x 9 = 144 = 64 + 64 + 16 for the verifier);
    # round 2: their last texts, 16; round 3: the 4 waiting queries, 4 x 30 = 120 = 64 + 56 (verifier: 36);
    # round 4: their last texts, 4
    assert [len(call) for call in navigator.calls] == [64] * 7 + [32, 16, 64, 56, 4]
    assert [len(call) for call in verifier.calls] == [64, 64, 16, 36]
    assert len(set().union(*navigator.calls[:8])) == 16  # 16 queries in the first round, no more


class RecordingGenerator:
    """A generation backend's stand-in that answers every listwise prompt with the given order and keeps the size
    of each call it receives."""

    id = "recording"

    def __init__(self):
        self.calls: list[int] = []

    def generate(self, chats, sampling):
        self.calls.append(len(chats))
        return [Completion(text="[2] > [1]") for _ in chats]


def test_listwise_rerank_calls_carry_at_most_max_batch_windows():
    """100 queries each asking for one window at once: the backend receives calls of at most 64 prompts (run.max_batch),
    and each query gets its own window back in the model's order."""
    backend = RecordingGenerator()
    reranker = LLMListwiseReranker(backend, [f"document {i}" for i in range(200)])
    scheduler = Scheduler(Roles(reranker=reranker), max_active=100)

    def rerank_once(state: QueryState):
        n = int(state.query.id[1:])
        state.trace["order"] = yield Rerank((2 * n, 2 * n + 1))
        return []

    finished = list(scheduler.run([QueryState(Query(f"q{n}", f"query {n}"), [], None) for n in range(100)], rerank_once))
    assert sum(backend.calls) == 100 and max(backend.calls) <= scheduler.max_batch == 64
    assert all(f.state.trace["order"] == [2 * int(f.state.query.id[1:]) + 1, 2 * int(f.state.query.id[1:])] for f in finished)
