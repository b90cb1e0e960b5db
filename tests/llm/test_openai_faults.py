"""What real OpenAI-compatible servers do that a canned answer does not: trickle bytes, rate-limit without a
Retry-After header, answer with malformed bodies, cut a thinking model's answer at max_tokens; and what the
machine around them does (a proxy meant for the internet, credentials in a URL). Against tests/openai_server.py."""

from __future__ import annotations

import json
import time

import pytest
from openai_server import (
    Raw,
    Trickle,
    chat_answer,
    context_too_long,
    quota_exceeded,
    thought_cut_at_max_tokens,
)

from garen_infer.errors import GarenError
from garen_infer.llm.backends import CachedBackend
from garen_infer.llm.backends.openai_answers import retry_delay
from garen_infer.llm.backends.openai_backend import OpenAIBackend
from garen_infer.llm.cache import ResponseCache
from garen_infer.llm.ledger import QueryLedger
from garen_infer.llm.types import SamplingParams

CHAT = [{"role": "user", "content": "Rank the passages."}]


@pytest.fixture
def backend(server):
    return OpenAIBackend("m", base_url=server.base_url, api_key_env=None, max_retries=2, backoff=0.01, timeout=5)


# ---- time: one deadline per request, retries that wait as long as the server asks -----------------------------------
def test_a_server_that_trickles_bytes_is_cut_off_at_the_request_deadline(server, backend):
    """Was: the timeout bounded each socket read, so one byte every 0.1 s kept the request alive for 20 s."""
    server.answer((200, Trickle(json.dumps(chat_answer("x" * 150)).encode(), 0.1)))
    backend.timeout, backend.max_retries = 1.0, 0
    start = time.perf_counter()
    with pytest.raises(GarenError, match=r"not answering \(no answer within 1 s; 1 attempts\).*longer timeout"):
        backend.generate([CHAT], SamplingParams())
    assert time.perf_counter() - start < 4


def test_a_slow_answer_within_the_deadline_is_kept(server, backend):
    server.answer((200, Trickle(json.dumps(chat_answer("ok")).encode(), 0.002)))
    [out] = backend.generate([CHAT], SamplingParams())
    assert (out.text, out.problems) == ("ok", [])


def test_a_429_without_retry_after_waits_as_its_body_says_and_each_retry_is_named(server, backend):
    """Was: Gemini's 429 (no header, the wait in its body) was retried after the backoff alone, and a retry left no
    trace on the answer."""
    server.answer((429, quota_exceeded(0.05)), (200, chat_answer("ok")))
    backend.backoff = 3.0  # what the 429 would wait without reading its body
    start = time.perf_counter()
    [out] = backend.generate([CHAT], SamplingParams())
    assert time.perf_counter() - start < 2
    assert (out.text, out.problems) == ("ok", ["retry:429"])
    server.answer((503, {"error": {"message": "loading"}}), (500, {}), (200, chat_answer("ok")))
    backend.backoff = 0.01
    [out] = backend.generate([CHAT], SamplingParams())
    assert out.problems == ["retry:503", "retry:500"]


def test_a_timeout_is_retried_and_named_on_the_answer(server, backend):
    server.answer((200, chat_answer("late"), 1.0, {}), (200, chat_answer("ok")))
    backend.timeout = 0.3
    [out] = backend.generate([CHAT], SamplingParams())
    assert (out.text, out.problems) == ("ok", ["retry:timeout"])


@pytest.mark.parametrize("body, seconds", [
    (json.dumps(quota_exceeded(38)), 38.0),
    ('{"error": {"message": "Rate limit reached. Please try again in 120ms."}}', 0.12),
    ('{"error": {"message": "Please try again in 1.5s."}}', 1.5),
    ('{"error": {"message": "Resource has been exhausted (e.g. check quota)."}}', None),
])
def test_the_wait_a_429_body_names(body, seconds):
    assert retry_delay(body) == seconds


def test_the_default_retry_window_outlasts_a_per_minute_quota():
    """Was: four retries from 1 s, about 15 s of waiting in all, so a quota that resets each minute ended the run."""
    defaults = OpenAIBackend("m", base_url="http://127.0.0.1:9/v1")
    waits, delay = [], defaults.backoff
    for _ in range(defaults.max_retries):
        waits.append(min(delay, defaults.max_backoff))
        delay *= 2
    assert sum(waits) > 120 and max(waits) <= defaults.max_backoff


def test_a_context_length_refusal_is_one_line_and_not_retried(server, backend):
    server.answer((400, context_too_long(4096, 5000)))
    with pytest.raises(GarenError,
                       match="refused the request for model 'm': HTTP 400: This model's maximum context "
                       "length is 4096"):
        backend.generate([CHAT], SamplingParams())
    assert len(server.requests) == 1


# ---- answers: read whole, checked before they are cached -----------------------------------------------------------
def test_an_answer_cut_at_max_tokens_keeps_its_finish_reason(server, backend):
    """Was: finish_reason was never read: an empty answer cut at max_tokens looked like a finished empty one."""
    server.answer((200, thought_cut_at_max_tokens(256)))
    [out] = backend.generate([CHAT], SamplingParams(max_tokens=256))
    assert (out.text, out.finish_reason, out.output_tokens) == ("", "length", 256)


@pytest.mark.parametrize("body, says", [
    ({"choices": ["x"]}, "a choice that is not an object: x"),
    ({"choices": {"0": {}}}, "without any 'choices'"),
    ({"choices": [{"message": "hello"}]}, "a 'message' that is not an object: 'hello'"),
    ({"choices": [{"message": {"content": 5}}]}, "a 'content' that is not text: '5'"),
    ({"choices": [{"message": {"content": "ok"}, "finish_reason": 3}]}, "a 'finish_reason' that is not text"),
    ({"choices": [{"message": {"content": "ok"}}], "usage": "many"}, "a 'usage' that is not an object"),
    ({"choices": [{"message": {"content": "ok"}}], "usage": {"prompt_tokens": "12"}},
     "a 'prompt_tokens' that is not a whole number: '12'"),
    ({"choices": [{"message": {"content": "ok"}}], "usage": {"prompt_tokens": 3, "completion_tokens": -1}},
     "a negative token count"),
    (Raw(b"<html>Bad gateway</html>"), "something that is not JSON: '<html>Bad gateway</html>'"),
])
def test_a_malformed_body_is_one_line_and_never_cached(server, backend, tmp_path, body, says):
    """Was: ``{"choices": ["x"]}`` raised AttributeError; ``usage.prompt_tokens: "12"`` was cached first and then
    broke the ledger of every later run from that cache."""
    server.answer((200, body))
    cached = CachedBackend(backend, ResponseCache(tmp_path / "cache.sqlite"))
    with pytest.raises(GarenError) as err:
        cached.generate([CHAT], SamplingParams())
    assert says in str(err.value) and "\n" not in str(err.value)
    assert len(cached.cache) == 0


def parts_answer(*parts, finish_reason="stop"):
    return {"choices": [{"message": {"role": "assistant", "content": list(parts)}, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 4}}


def test_content_parts_are_read_as_their_text_without_the_thought_and_counted_on_every_reading(
    server, backend, tmp_path
):
    """Was: a ``content`` of parts (as some reasoning APIs answer) was refused as a malformed body and stopped
    the run."""
    server.answer((200, parts_answer({"type": "reasoning", "text": "[1] is about lava, so"},
                                     {"type": "thinking", "thinking": "maybe [3]"},
                                     {"type": "text", "text": "[2] > "}, {"type": "text", "text": "[1]"})))
    cached = CachedBackend(backend, ResponseCache(tmp_path / "cache.sqlite"))
    first = cached.generate([CHAT], SamplingParams())[0]
    again = cached.generate([CHAT], SamplingParams())[0]
    for answer in (first, again):
        assert answer.text == "[2] > [1]"
        ledger = QueryLedger()
        ledger.record("reranker", answer)
        assert ledger.summary()["problems"] == {"content_not_text": 1}
    assert again.cached and len(server.requests) == 1
    server.answer((200, chat_answer("[1]")))  # text as content: nothing counted
    ledger = QueryLedger()
    ledger.record("reranker", backend.generate([CHAT], SamplingParams())[0])
    assert ledger.summary()["problems"] == {}


def test_content_parts_on_an_agent_turn_keep_the_tool_calls(server, backend):
    answer = parts_answer({"type": "text", "text": "Searching."}, finish_reason="tool_calls")
    answer["choices"][0]["message"]["tool_calls"] = [
        {"id": "x", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"rg lava\"}"}}]
    server.answer((200, answer))
    [out] = backend.chat_with_tools([(CHAT, [])], SamplingParams())
    assert out.text == "Searching." and out.extra["content_not_text"] is True
    assert [(c["name"], c["arguments"]) for c in out.extra["tool_calls"]] == [("bash", {"command": "rg lava"})]


@pytest.mark.parametrize("part", [{"type": "image_url", "image_url": {"url": "x"}},
                                  {"type": "text", "text": 3}, "[1] > [2]"])
def test_a_content_part_that_is_not_text_or_a_thought_is_one_line_and_never_cached(server, backend, tmp_path, part):
    server.answer((200, parts_answer({"type": "text", "text": "[1]"}, part)))
    cached = CachedBackend(backend, ResponseCache(tmp_path / "cache.sqlite"))
    with pytest.raises(GarenError, match="a content part that is not text") as err:
        cached.generate([CHAT], SamplingParams())
    assert "\n" not in str(err.value) and len(cached.cache) == 0


def test_token_counts_a_server_leaves_out_or_nulls_count_as_zero(server, backend):
    server.answer((200, {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": None}}))
    [out] = backend.generate([CHAT], SamplingParams())
    assert (out.text, out.input_tokens, out.output_tokens, out.finish_reason) == ("ok", 0, 0, "stop")


def test_tool_calls_that_are_not_objects_are_one_line(server, backend):
    server.answer((200, {"choices": [{"message": {"content": None, "tool_calls": ["search"]}}]}))
    with pytest.raises(GarenError, match="tool_calls that are not objects"):
        backend.chat_with_tools([(CHAT, [])], SamplingParams())


# ---- settings that change answers: sent, and part of the cache key -----------------------------------------
def test_reasoning_effort_and_extra_body_are_sent_and_name_the_backend(server):
    server.answer((200, chat_answer("ok")))
    plain = OpenAIBackend("m", base_url=server.base_url, api_key_env=None)
    thrifty = OpenAIBackend("m", base_url=server.base_url, api_key_env=None, reasoning_effort="low",
                            extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    plain.generate([CHAT], SamplingParams())
    thrifty.generate([CHAT], SamplingParams())
    assert (
        "reasoning_effort" not in server.requests[0]["body"]
        and "chat_template_kwargs" not in server.requests[0]["body"]
    )
    assert server.requests[1]["body"]["reasoning_effort"] == "low"
    assert server.requests[1]["body"]["chat_template_kwargs"] == {"enable_thinking": False}
    assert plain.id == f"openai:{server.base_url}:m"  # the server and model alone
    assert (
        thrifty.id
        == f'{plain.id}|extra={{"chat_template_kwargs": {{"enable_thinking": false}}}}|reasoning_effort=low'
    )


def test_an_unknown_reasoning_effort_is_refused_by_the_preset_check():
    from garen_infer.llm.model_specs import check_model_spec

    with pytest.raises(GarenError, match="reasoning_effort"):
        check_model_spec({"backend": "openai", "model": "m", "reasoning_effort": "max"}, "models.reranker")


# ---- the machine around the server: proxies, credentials ------------------------------------------------------------
@pytest.fixture
def proxy_without_no_proxy(monkeypatch):
    """A cluster node's environment: a proxy for the internet (here a port where nothing listens), no no_proxy."""
    for name in ("no_proxy", "NO_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("http_proxy", "http://proxyuser:proxypass@127.0.0.1:9")
    monkeypatch.setenv("HTTP_PROXY", "http://proxyuser:proxypass@127.0.0.1:9")


def test_a_server_on_this_machine_is_reached_without_the_proxy(server, backend, proxy_without_no_proxy):
    """Was: ``http_proxy`` without ``no_proxy`` sent requests for a local ``vllm serve`` to the proxy."""
    server.answer((200, chat_answer("ok")))
    for host in ("127.0.0.1", "localhost"):
        backend.base_url = server.base_url.replace("127.0.0.1", host)
        [out] = backend.generate([CHAT], SamplingParams())
        assert out.text == "ok"


def test_a_failure_through_a_proxy_names_the_proxy_without_its_password(proxy_without_no_proxy):
    remote = OpenAIBackend("m", base_url="http://inference.example.org/v1", api_key_env=None, max_retries=0)
    with pytest.raises(GarenError) as err:
        remote.generate([CHAT], SamplingParams())
    assert "through the proxy http://***@127.0.0.1:9" in str(err.value) and "no_proxy" in str(err.value)
    assert "proxypass" not in str(err.value)


def test_a_base_url_with_a_password_is_refused_before_anything_is_written(tmp_path, capsys):
    """Was: ``http://user:password@host`` ran and printed the password 13 times, and wrote it to config.json."""
    from garen_infer.doors.cli import main

    spec = json.dumps({"backend": "openai", "base_url": "http://alice:hunter2@127.0.0.1:9/v1", "model": "m",
                       "api_key_env": None})
    code = main(["run", "--dataset", str(tmp_path / "absent"), "--index", str(tmp_path / "i"), "--method", "rerank",
                 "--set", f"models.reranker={spec}", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "hunter2" not in err and "alice" not in err
    assert "invalid setting models.reranker.base_url: http://***@127.0.0.1:9/v1 holds credentials" in err
    assert not (tmp_path / "run").exists()
    with pytest.raises(GarenError, match="holds credentials") as refused:
        # the Python API, replicas
        OpenAIBackend("m", base_url=["http://127.0.0.1:8000/v1", "http://bob:pw@127.0.0.1:8001/v1"])
    assert "pw" not in str(refused.value).replace("pwd", "")


@pytest.mark.parametrize("logprob", [None, "low", float("nan"), 0.5])
def test_a_logprob_that_is_not_a_number_is_one_line_and_never_cached(server, backend, tmp_path, logprob):
    """Was: ``"logprob": null`` raised a TypeError traceback; NaN became P(yes) NaN and was cached."""
    answer = {"choices": [{"message": {"content": "yes"}, "logprobs": {"content": [
        {"token": "yes", "logprob": -0.1,
         "top_logprobs": [{"token": "yes", "logprob": -0.1}, {"token": "no", "logprob": logprob}]}]}}]}
    server.answer((200, Raw(json.dumps(answer).encode())))  # NaN as JSON's NaN, which Python's json reads
    cached = CachedBackend(backend, ResponseCache(tmp_path / "cache.sqlite"))
    with pytest.raises(GarenError, match="a logprob that is not a number at most 0"):
        cached.score_yes_no([CHAT], "")
    assert len(cached.cache) == 0


def named(model: str, text: str = "[1]") -> dict:
    return {**chat_answer(text), "model": model}


def test_an_answer_naming_another_model_is_counted_each_time_and_said_once(server, backend, capsys):
    server.answer((200, named("other-7b")), (200, named("other-7b")), (200, named("m")))
    problems = [backend.generate([CHAT], SamplingParams())[0].problems for _ in range(3)]
    assert problems == [["other_model"], ["other_model"], []]
    warnings = [line for line in capsys.readouterr().err.splitlines() if "other-7b" in line]
    assert len(warnings) == 1 and "not 'm' as asked" in warnings[0]


@pytest.mark.parametrize("served, same", [("m", True), ("m-2024-08-06", True), ("google/m", True),
                                          ("mm", False), ("m2", False), ("other/m-x", False)])
def test_a_dated_or_vendor_prefixed_name_is_the_model_asked_for(served, same):
    from garen_infer.llm.backends.openai_backend import same_model

    assert same_model(served, "m") is same


@pytest.mark.parametrize("max_tokens", [0, -1, 10**12, (1 << 20) + 1])
def test_max_tokens_outside_any_context_is_refused_before_a_request(max_tokens):
    from garen_infer.llm.model_specs import check_model_spec

    with pytest.raises(GarenError, match="max_tokens") as err:
        check_model_spec({"backend": "openai", "model": "m", "sampling": {"max_tokens": max_tokens}}, "models.reranker")
    assert "\n" not in str(err.value)
