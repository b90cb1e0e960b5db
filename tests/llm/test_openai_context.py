"""A served model's context length: the OpenAI-compatible backend reads it where the server lists it (vLLM's and
SGLang's ``GET /v1/models``, ``max_model_len``) and a served RARG agent keeps its chats under it; where no server
lists it (hosted APIs), a chat the server refuses as too long ends that query's episode, counted, and the run goes
on. Against tests/openai_server.py, with the real loop, tools and compaction."""

from __future__ import annotations

import json

import pytest
from agent_scripts import answer, call, query_of, sequence, turn_of
from openai_server import Status, chat_answer, context_too_long, model_list
from test_rarg_agent import agent_index  # noqa: F401  (a fixture: the tiny index plus the corpus as files)

from garen_infer.errors import GarenError
from garen_infer.llm.backends import CachedBackend
from garen_infer.llm.backends.openai_backend import OpenAIBackend
from garen_infer.llm.cache import NoCache, ResponseCache
from garen_infer.llm.ledger import QueryLedger
from garen_infer.llm.roles import LLMToolChat, Roles
from garen_infer.llm.types import Completion, SamplingParams
from garen_infer.running.runner import RunConfig
from garen_infer.running.session import execute

CHAT = [{"role": "system", "content": "Search."}, {"role": "user", "content": "Query: lava"}]
SERVED = 1000  # the served model's max_model_len in the runs below
MAX_TOKENS = 100  # each agent turn's answer


def make_backend(server, model="m"):
    return OpenAIBackend(model, base_url=server.base_url, api_key_env=None, max_retries=0, timeout=30)


# ---- the backend: asked once, at the first agent turn ---------------------------------------------------------------
def test_the_served_context_length_is_asked_once_at_the_first_agent_turn_never_when_built(server):
    server.models = (200, model_list(("m", 4096, None)))
    server.answer((200, chat_answer("done")))
    backend = make_backend(server)
    backend.generate([CHAT], SamplingParams())
    assert server.gets == []  # building the backend (a preset check) and other roles never ask
    first = backend.chat_with_tools([(CHAT, []), (CHAT + [{"role": "user", "content": "more"}], [])],
                                    SamplingParams(max_tokens=512))
    again = backend.chat_with_tools([(CHAT, [])], SamplingParams(max_tokens=1024))
    assert server.gets == ["/v1/models"]
    assert [c.extra["prompt_limit"] for c in first + again] == [3584, 3584, 3072]


def test_a_lora_adapter_takes_its_base_models_context_length(server):
    server.models = (200, model_list(("base", 8192, None), ("adapter", None, "base")))
    server.answer((200, chat_answer("done")))
    [out] = make_backend(server, "adapter").chat_with_tools([(CHAT, [])], SamplingParams(max_tokens=192))
    assert out.extra["prompt_limit"] == 8000


@pytest.mark.parametrize("models", [(404, {"error": {"message": "Not Found"}}),
                                    (200, {"object": "list", "data": [{"id": "m", "object": "model"}]}),
                                    (200, model_list(("another", 4096, None))),
                                    (200, ["not", "a", "list"])])
def test_a_server_that_lists_no_context_length_is_asked_once_and_leaves_it_unknown(server, models):
    server.models = models
    server.answer((200, chat_answer("done")))
    backend = make_backend(server)
    for _ in range(2):
        [out] = backend.chat_with_tools([(CHAT, [])], SamplingParams())
        assert "prompt_limit" not in out.extra and out.text == "done"
    assert server.gets == ["/v1/models"]


def test_a_server_still_starting_is_asked_again_at_the_next_turn(server):
    server.models = (503, {"error": {"message": "Service Unavailable"}})
    server.answer((200, chat_answer("done")))
    backend = make_backend(server)
    [early] = backend.chat_with_tools([(CHAT, [])], SamplingParams(max_tokens=96))
    server.models = (200, model_list(("m", 4096, None)))
    [later] = backend.chat_with_tools([(CHAT, [])], SamplingParams(max_tokens=96))
    backend.chat_with_tools([(CHAT, [])], SamplingParams(max_tokens=96))
    assert "prompt_limit" not in early.extra and later.extra["prompt_limit"] == 4000
    assert server.gets == ["/v1/models", "/v1/models"]


def test_an_agent_turn_refused_as_too_long_is_an_answer_marked_refused_and_never_cached(server, tmp_path):
    server.answer((400, context_too_long(4096, 5000)))
    cached = CachedBackend(make_backend(server), ResponseCache(tmp_path / "cache.sqlite"))
    [out] = cached.chat_with_tools([(CHAT, [])], SamplingParams())
    assert (
        out.extra["refused"].startswith("the server at ")
        and "maximum context length is 4096" in out.extra["refused"]
    )
    assert out.problems == ["context_refused"] and out.extra["tool_calls"] == [] and len(cached.cache) == 0
    for given in (out, Completion(extra=dict(out.extra))):  # as the backend gave it; as a waiting asker shares it
        ledger = QueryLedger()
        ledger.record("agent", given)
        assert ledger.summary()["problems"] == {"context_refused": 1}
    server.answer((400, {"error": {"message": "Invalid 'tools' format", "type": "invalid_request_error"}}))
    with pytest.raises(GarenError, match="HTTP 400: Invalid 'tools' format"):  # any other refusal stops the run
        cached.chat_with_tools([(CHAT, [])], SamplingParams())


# ---- a served RARG agent ---------------------------------------------------------------------------------------------
def tokens(messages) -> int:
    return sum(len(m.get("content") or "") for m in messages) // 4


def served_agent(script, refused: list):
    """A vLLM-like server for the agent: answers ``script``'s calls as ``tool_calls``, and refuses (HTTP 400, as vLLM
    does) a chat whose prompt and ``max_tokens`` exceed ``SERVED`` tokens."""
    def answer_of(body):
        messages = body["messages"]
        if tokens(messages) + body["max_tokens"] > SERVED:
            refused.append(tokens(messages))
            return Status(400, context_too_long(SERVED, tokens(messages) + body["max_tokens"]))
        text, calls = script(query_of(messages), turn_of(messages), messages)
        reply = chat_answer(text or None, tokens(messages), 1 + len(text) // 4, "tool_calls" if calls else "stop")
        reply["choices"][0]["message"]["tool_calls"] = [
            {"id": f"chatcmpl-tool-{k}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(arguments)}}
            for k, (name, arguments) in enumerate(calls)]
        return reply
    return answer_of


def run_served(server, dataset, index, out, limit):
    searches = [call("bash", command=f"rg -n {w} corpus") for w in ("the", "of", "and", "a", "is", "in", "to", "lava")]
    refused: list[int] = []
    server.answer((200, served_agent(sequence(*searches, final=answer("corpus/vol1.txt")), refused)))
    agent = LLMToolChat(CachedBackend(make_backend(server), NoCache()), SamplingParams(max_tokens=MAX_TOKENS))
    lines: list[str] = []
    metrics = execute(dataset, index, RunConfig.build(method="rarg", limit=limit), out,
                      roles=Roles(agent=agent), log=lines.append)
    trace = {r["qid"]: r for r in map(json.loads, (out / "trace.jsonl").read_text().splitlines())}
    return metrics, trace, refused, lines


def test_a_served_agent_keeps_its_chats_under_the_context_length_its_server_lists(
    agent_index, tiny_dataset, tmp_path, server  # noqa: F811
):
    """Was: without ``methods.rarg.context_limit`` a served agent had no limit; its server refused the first chat
    that outgrew the model (HTTP 400) and the run stopped."""
    server.models = (200, model_list(("m", SERVED, None)))
    metrics, trace, refused, _ = run_served(server, tiny_dataset, agent_index, tmp_path / "run", limit=1)
    agent = trace["q1"]["trace"]["agent"]
    assert refused == [] and len(server.requests) > 8 and server.gets == ["/v1/models"]
    assert max(tokens(r["body"]["messages"]) for r in server.requests) + MAX_TOKENS <= SERVED
    assert agent["stop"] == "answer" and agent["compactions"] >= 1 and trace["q1"]["ranking"]
    assert "context_refused" not in metrics["answer_problems"]


def test_a_chat_a_hosted_server_refuses_as_too_long_ends_its_episode_and_the_run_goes_on(
    agent_index, tiny_dataset, tmp_path, server  # noqa: F811
):
    """Was: the refusal (HTTP 400) stopped the run, and a rerun replayed the same chats into the same refusal."""
    metrics, trace, refused, lines = run_served(server, tiny_dataset, agent_index, tmp_path / "run", limit=2)
    assert server.gets == ["/v1/models"] and len(refused) == 2  # each query's episode hit the wall once
    assert sorted(trace) == ["q1", "q2"]
    for record in trace.values():
        assert record["trace"]["agent"]["stop"] == "context_full" and record["ranking"] == []
        assert record["ledger"]["roles"]["agent"]["problems"] == {"context_refused": 1}
        assert "refused this chat" in record["trace"]["transcript"][-1]["text"]
    assert metrics["answer_problems"] == {"context_refused": 2}
    assert any(line.startswith("[run] answers not used as asked: agent context_refused 2") for line in lines)
