"""Requests reach an engine as it can take them, and the response cache keeps each answer as it arrives: a server
holds ``requests_at_once`` requests, refilled as each returns; a local engine gets its own batches; a failure
loses only the answers that had not come back."""

from __future__ import annotations

import threading
import time

import pytest

from garen_infer.errors import GarenError
from garen_infer.llm.backends import CachedBackend
from garen_infer.llm.backends.dispatch import as_answered
from garen_infer.llm.cache import NoCache, ResponseCache
from garen_infer.llm.types import Completion, SamplingParams

PARAMS = SamplingParams(max_tokens=8)
WAIT = 10.0  # seconds a thread may take before the test gives up on it (a failure, not a hang)


def chat(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


class Server:
    """Answers each chat with its text after ``delay(text)`` seconds; counts the requests it holds at once.
    A chat that says "fail" is refused (after the others sent with it have been answered)."""

    id = "test:server"

    def __init__(self, slots: int, delay=lambda text: 0.01):
        self.requests_at_once, self.delay = slots, delay
        self.now = self.most = 0
        self.calls: list[int] = []
        self.lock = threading.Lock()

    def generate(self, chats, params):
        with self.lock:
            self.now += len(chats)
            self.most = max(self.most, self.now)
            self.calls.append(len(chats))
        try:
            text = chats[0][0]["content"]
            time.sleep(self.delay(text))
            if text == "fail":
                raise GarenError("the server refused the request")
            return [Completion(text=c[0]["content"].upper(), output_tokens=1) for c in chats]
        finally:
            with self.lock:
                self.now -= len(chats)


class Local:
    """A local engine with batches of ``batch_size``; the batch that holds "fail" fails."""

    id = "test:local"

    def __init__(self, batch_size: int):
        self.batch_size, self.calls = batch_size, []

    def generate(self, chats, params):
        self.calls.append(len(chats))
        if any(c[0]["content"] == "fail" for c in chats):
            raise GarenError("out of memory")
        return [Completion(text=c[0]["content"].upper()) for c in chats]


def test_a_server_keeps_its_slots_full_and_a_slow_answer_holds_up_no_other():
    server = Server(slots=3, delay=lambda text: 0.3 if text == "slow" else 0.01)
    texts = ["slow"] + [f"t{i}" for i in range(12)]
    order = [position for position, _ in as_answered(server, lambda chats: server.generate(chats, PARAMS),
                                                     [chat(t) for t in texts])]
    assert sorted(order) == list(range(13)) and order[-1] == 0  # the slow one comes last, the others flowed past it
    assert set(server.calls) == {1} and server.most == 3


def test_a_server_failure_keeps_the_answers_that_came_back(tmp_path):
    server = Server(slots=2)
    cached = CachedBackend(server, ResponseCache(tmp_path / "cache.sqlite"))
    texts = ["a", "b", "fail", "c"]
    with pytest.raises(GarenError, match="refused"):
        cached.generate([chat(t) for t in texts], PARAMS)
    again = CachedBackend(Server(slots=2), ResponseCache(tmp_path / "cache.sqlite"))
    answers = again.generate([chat("a"), chat("b")], PARAMS)
    assert [a.text for a in answers] == ["A", "B"] and all(a.cached for a in answers)


def test_a_local_engine_is_given_its_own_batches_and_keeps_those_done(tmp_path):
    local = Local(batch_size=2)
    cached = CachedBackend(local, ResponseCache(tmp_path / "cache.sqlite"))
    with pytest.raises(GarenError, match="out of memory"):
        cached.generate([chat(t) for t in ("a", "b", "c", "d", "fail")], PARAMS)
    assert local.calls == [2, 2, 1]
    answers = CachedBackend(Local(batch_size=2), ResponseCache(tmp_path / "cache.sqlite")).generate(
        [chat("c"), chat("d")], PARAMS
    )
    assert all(a.cached for a in answers)


def test_answers_come_back_in_the_order_asked_with_repeats_answered_once(tmp_path):
    server = Server(slots=4, delay=lambda text: 0.05 if text == "x" else 0.0)
    answers = CachedBackend(server, ResponseCache(tmp_path / "cache.sqlite")).generate(
        [chat(t) for t in "xyxz"], PARAMS
    )
    assert [a.text for a in answers] == ["X", "Y", "X", "Z"] and [a.cached for a in answers] == [
        False,
        False,
        True,
        False,
    ]
    assert sum(server.calls) == 3


def test_a_prompt_on_its_way_is_not_sent_again_by_another_caller(tmp_path):
    """The scheduler sends a server one request per call from many threads: a prompt that two queries (or two
    items of one request) ask at the same time reaches the server once; the later askers get a cache hit."""
    server = Server(slots=4, delay=lambda text: 1.0 if text == "x" else 0.0)
    cached = CachedBackend(server, NoCache())
    answers: dict[str, list] = {}

    def ask(name: str, text: str) -> None:
        answers[name] = cached.generate([chat(text)], PARAMS)

    first = threading.Thread(target=ask, args=("first", "x"))
    first.start()
    time.sleep(0.05)  # "x" is on its way
    second = [threading.Thread(target=ask, args=(f"again{i}", "x")) for i in range(3)]
    other = threading.Thread(target=ask, args=("other", "y"))
    for thread in (*second, other):
        thread.start()
    for thread in (first, *second, other):
        thread.join(WAIT)
    assert sorted(server.calls) == [1, 1]  # "x" once, "y" once
    assert [a.text for a in answers["first"]] == ["X"] and not answers["first"][0].cached
    assert all(answers[f"again{i}"][0].text == "X" and answers[f"again{i}"][0].cached for i in range(3))


def test_when_the_sender_of_a_shared_prompt_fails_the_others_ask_again(tmp_path):
    class FailsOnce(Server):
        def generate(self, chats, params):
            failing = not self.calls
            answers = super().generate(chats, params)
            if failing:
                raise GarenError("the server went away")
            return answers

    server = FailsOnce(slots=2, delay=lambda text: 0.5)
    cached = CachedBackend(server, NoCache())
    outcome: dict[str, object] = {}

    def ask(name: str) -> None:
        try:
            outcome[name] = cached.generate([chat("x")], PARAMS)[0]
        except GarenError as err:
            outcome[name] = err

    first = threading.Thread(target=ask, args=("first",))
    first.start()
    time.sleep(0.05)
    second = threading.Thread(target=ask, args=("second",))
    second.start()
    first.join(WAIT)
    second.join(WAIT)
    assert isinstance(outcome["first"], GarenError)
    assert outcome["second"].text == "X" and not outcome["second"].cached  # it paid for its own request
    assert server.calls == [1, 1]


class Generator:
    """The generator role as the index stages hold it: a backend (here the cache's wrapper) and its sampling."""

    name = "test"

    def __init__(self, backend):
        self.backend, self.sampling = backend, PARAMS


def test_index_prompts_stream_to_a_server_each_with_its_own_retries(tmp_path):
    from garen_infer.llm.json_generation import stream_json

    # "slow" answers last; "retry" is unreadable until a sampled attempt (the server echoes the upper-cased text)
    server = Server(slots=4, delay=lambda text: 0.3 if text == "slow" else 0.01)
    texts = ["slow", "retry", "a", "b", "c"]

    def parse(i, text):
        return None if text == "RETRY" else text

    generator = Generator(CachedBackend(server, ResponseCache(tmp_path / "cache.sqlite")))
    order = list(stream_json(generator, len(texts), lambda i: chat(texts[i]), parse, retries=1))
    assert order[-1] == (0, "SLOW") and dict(order) == {0: "SLOW", 1: None, 2: "A", 3: "B", 4: "C"}
    assert server.calls.count(1) == len(server.calls) == 6  # five prompts and one sampled retry, one request each


def test_a_prompt_answered_and_asked_again_belongs_to_its_new_sender():
    """Without a cache, a prompt whose answer came back is sent anew by the next asker; the first sender
    ending its claims (after its other prompts) leaves the new claim alone."""
    from garen_infer.llm.backends import OnTheWay

    on_the_way = OnTheWay()
    first, _ = on_the_way.claim(["k"])
    on_the_way.give("k", first["k"], {"text": "A"})
    again, awaited = on_the_way.claim(["k"])
    assert list(again) == ["k"] and not awaited  # answered: the next asker sends it
    on_the_way.release(first)
    _, waiting = on_the_way.claim(["k"])
    assert waiting == again  # still on its way with its new sender
    on_the_way.give("k", again["k"], {"text": "B"})
    assert on_the_way.wait(waiting["k"]) == {"text": "B"}
