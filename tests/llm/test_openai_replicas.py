"""Several replicas behind one OpenAI-compatible backend: requests balanced by in-flight count with a limit per
replica, a replica killed mid-run taken over by the others, and ledgers and cache keys that do not depend on
which replica answered. The servers are test_openai_backend.py's stdlib fakes on 127.0.0.1."""

from __future__ import annotations

import json

import pytest
from openai_server import ScriptedServer, chat_answer

from garen_infer.llm.backends.openai_backend import OpenAIBackend
from garen_infer.llm.cache import NoCache, ResponseCache
from garen_infer.llm.types import SamplingParams
from garen_infer.running.runner import RunConfig
from garen_infer.running.session import execute


def ranking_answer(body):
    """A listwise answer that depends on the prompt only: the passages in reverse order."""
    prompt = body["messages"][-1]["content"]
    count = sum(f"[{k}]" in prompt for k in range(1, 21))
    return chat_answer(" > ".join(f"[{k}]" for k in range(count, 0, -1)))


@pytest.fixture
def servers(request):
    made = []

    def make(count, delay=0.05, kill_at=None):
        for k in range(count):
            server = ScriptedServer(kill_at=kill_at if k == 0 else None)
            server.answer((200, ranking_answer, delay, {}))
            made.append(server)
        return made[-count:]

    yield make
    for server in made:
        server.stop()


def replica_backend(servers, **options):
    return OpenAIBackend("m", base_url=[s.base_url for s in servers], api_key_env=None, backoff=0.05,
                         timeout=5, **options)


def test_requests_are_balanced_with_a_limit_per_replica(servers):
    fleet = servers(3, delay=0.1)
    backend = replica_backend(fleet, concurrency=2)
    chats = [[{"role": "user", "content": f"[1] [2] q{i}"}] for i in range(12)]
    assert len(backend.generate(chats, SamplingParams())) == 12
    # balanced by requests in flight: each replica takes its share, though a replica that answers sooner on a
    # busy machine may take one more than another
    assert sum(len(s.requests) for s in fleet) == 12 and min(len(s.requests) for s in fleet) >= 2
    assert all(s.max_in_flight <= 2 for s in fleet) and max(s.max_in_flight for s in fleet) == 2
    assert backend.id == "openai:replicas:m"  # not the URLs: the replicas serve one model


def test_a_failing_replica_is_left_for_the_others_at_once(servers):
    good, bad = servers(2)
    bad.answer((503, {"error": "overloaded"}))
    backend = replica_backend([bad, good], concurrency=1, max_retries=1)
    backend.backoff = 2.0  # how long the failed replica rests; the request it failed goes on to the other at once
    chats = [[{"role": "user", "content": f"[1] q{i}"}] for i in range(6)]
    assert len(backend.generate(chats, SamplingParams())) == 6
    assert good.answered == 6 and len(bad.requests) == 1  # set aside after failing, not asked for every request


def rerank_config(spec) -> RunConfig:
    return RunConfig.build(method="rerank", method_options={"budget": 8, "window": 4, "stride": 2},
                           models={"reranker": spec})


def openai_spec(fleet, **extra) -> dict:
    return {"backend": "openai", "model": "m", "base_url": [s.base_url for s in fleet], "api_key_env": None,
            "concurrency": 2, "backoff": 0.05, "timeout": 5, **extra}


def traces(out) -> dict:
    return {r["qid"]: r for r in map(json.loads, (out / "trace.jsonl").read_text().splitlines())}


def busiest_home(fleet, dataset):
    """The server that is home to the most queries (four queries over three replicas: two or more)."""
    from collections import Counter

    from garen_infer.llm.backends.replicas import ReplicaPool

    pool = ReplicaPool([s.base_url for s in fleet], 1, 0.0, 0.0)
    homes = Counter(pool.home(q.id).base_url for q in dataset.judged_queries())
    return next(s for s in fleet if s.base_url == homes.most_common(1)[0][0])


def test_a_replica_killed_mid_run_loses_no_request_and_answers_none_twice(servers, tiny_dataset, tiny_index, tmp_path):
    alone = servers(1)
    execute(tiny_dataset, tiny_index, rerank_config(openai_spec(alone)), tmp_path / "one", cache=NoCache(),
            log=lambda *_: None)

    fleet = servers(3, delay=0.1)
    dead = busiest_home(fleet, tiny_dataset)
    dead.kill_at = 2  # the home of two queries or more dies while its second request is in flight
    execute(tiny_dataset, tiny_index, rerank_config(openai_spec(fleet)), tmp_path / "three", cache=NoCache(),
            log=lambda *_: None)
    assert dead.killed.is_set() and len(dead.requests) == 2 and dead.answered < 2  # what it had in flight died with it

    one, three = traces(tmp_path / "one"), traces(tmp_path / "three")
    assert set(three) == {q.id for q in tiny_dataset.judged_queries()}
    assert {q: r["ranking"] for q, r in three.items()} == {q: r["ranking"] for q, r in one.items()}
    calls = sum(r["ledger"]["model_calls"] for r in three.values())
    assert (
        calls
        == sum(r["ledger"]["requests"] for r in three.values())
        == sum(r["ledger"]["model_calls"] for r in one.values())
    )
    assert calls == sum(s.answered for s in fleet)  # each request answered once, and recorded once
    untimed = ("model_seconds", "roles", "problems")  # a retry is a problem counted where it happened
    assert {q: {k: v for k, v in r["ledger"].items() if k not in untimed} for q, r in three.items()} == \
        {q: {k: v for k, v in r["ledger"].items() if k not in untimed} for q, r in one.items()}
    retried = [r["ledger"]["problems"] for r in three.values() if r["ledger"].get("problems")]
    assert retried and all(set(p) == {"retry:connection"} for p in retried)


def test_other_replicas_of_the_model_are_answered_from_the_same_cache(servers, tiny_dataset, tiny_index, tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    first = servers(2)
    execute(tiny_dataset, tiny_index, rerank_config(openai_spec(first)), tmp_path / "a", cache=cache,
            log=lambda *_: None)
    assert sum(s.answered for s in first) > 0
    later = servers(3)  # another deployment of the model, with one replica more
    execute(tiny_dataset, tiny_index, rerank_config(openai_spec(later)), tmp_path / "b", cache=cache,
            log=lambda *_: None)
    assert [len(s.requests) for s in later] == [0, 0, 0]
    assert all(r["ledger"]["model_calls"] == 0 for r in traces(tmp_path / "b").values())


def test_a_replicas_rest_after_failures_is_capped_at_max_backoff():
    """backoff 1 s doubled per failure in a row, never past max_backoff: 25 failures rest 30 s, not 194 days."""
    import time

    from garen_infer.llm.backends.replicas import ReplicaPool

    pool = ReplicaPool(["http://127.0.0.1:9/v1"], concurrency=1, backoff=1.0, max_backoff=30.0)
    rests = []
    for _ in range(25):
        replica = pool.acquire()
        pool.release(replica, failed=True)
        rests.append(replica.resting_until - time.monotonic())
    assert rests[0] == pytest.approx(1.0, abs=0.5) and rests[3] == pytest.approx(8.0, abs=0.5)
    assert max(rests) <= 30.0 and rests[-1] == pytest.approx(30.0, abs=0.5)


# ---- affinity: the requests of one query on one replica -----------------------------------------------------------
def affine_pool(count: int = 3, concurrency: int = 2):
    from garen_infer.llm.backends.replicas import ReplicaPool

    return ReplicaPool([f"http://10.0.0.{k}:8000/v1" for k in range(count)], concurrency, backoff=5.0, max_backoff=5.0)


def test_a_query_goes_to_its_home_replica_and_queries_spread_over_the_replicas():
    from garen_infer.llm.backends.replicas import affinity

    pool = affine_pool()
    homes = {}
    for qid in (f"q{k}" for k in range(60)):
        with affinity(qid):
            first = pool.acquire()
            pool.release(first, failed=False)
            again = pool.acquire()
            pool.release(again, failed=False)
        assert again is first is pool.home(qid)
        homes[qid] = first.base_url
    assert len(set(homes.values())) == 3 and pool.affinity.home == 120
    # a replica more moves only the queries that now belong to it
    bigger = affine_pool(4)
    moved = {q for q, url in homes.items() if bigger.home(q).base_url != url}
    assert moved and all(bigger.home(q).base_url.startswith("http://10.0.0.3") for q in moved)


def test_a_saturated_home_sends_the_request_to_the_least_busy_replica():
    from garen_infer.llm.backends.replicas import affinity

    pool = affine_pool(concurrency=2)
    with affinity("q7"):
        home = pool.acquire()
        assert pool.acquire() is home  # one slot left there
        other = pool.acquire()  # the home is full: the least busy other
    assert other is not home and other.in_flight == 1
    assert (pool.affinity.home, pool.affinity.saturated) == (2, 1)
    pool.release(home, failed=False)
    with affinity("q7"):
        assert pool.acquire() is home  # a free slot again: home


def test_a_failing_home_is_left_until_it_answers_again():
    from garen_infer.llm.backends.replicas import affinity

    pool = affine_pool()
    with affinity("q3"):
        home = pool.acquire()
        pool.release(home, failed=True)  # resting now
        elsewhere = pool.acquire(tried={home})
        assert elsewhere is not home
        pool.release(elsewhere, failed=False)
        assert pool.acquire() is not home  # another request of the query, while the home rests
    assert pool.affinity.failing == 2
    home.resting_until = 0.0  # its rest is over
    with affinity("q3"):
        assert pool.acquire() is home


def test_each_querys_windows_reach_one_replica_in_a_run(servers, tiny_dataset, tiny_index, tmp_path):
    fleet = servers(2, delay=0.02)
    config = RunConfig.build(method="rerank", method_options={"budget": 12, "window": 4, "stride": 2},
                             first_stage={"kind": "dense"},  # every document: several windows a query
                             models={"reranker": openai_spec(fleet, concurrency=8)})  # room for every query
    execute(tiny_dataset, tiny_index, config, tmp_path / "run", cache=NoCache(), log=lambda *_: None)
    where: dict[str, set[int]] = {}
    for number, server in enumerate(fleet):
        for request in server.requests:
            prompt = request["body"]["messages"][-1]["content"]
            for query in tiny_dataset.judged_queries():
                if query.text in prompt:
                    where.setdefault(query.id, set()).add(number)
    windows = sum(len(s.requests) for s in fleet)
    assert windows > len(where) == len(tiny_dataset.judged_queries())  # several windows a query
    assert all(len(replicas) == 1 for replicas in where.values())
