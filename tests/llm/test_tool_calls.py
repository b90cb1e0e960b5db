"""Function calling across backends: reading inline tool calls, the fallback format for chat templates without
tools, native templates with tools, the transformers backend with a real (tiny) model, the response cache, and the
OpenAI-compatible protocol (``tools`` in, ``tool_calls`` out)."""

from __future__ import annotations

import json

import pytest

from garen_infer.llm.backends import CachedBackend
from garen_infer.llm.backends.tool_format import fallback_chat, render_tool_chat, template_knows_tools
from garen_infer.llm.cache import ResponseCache
from garen_infer.llm.tool_calls import ToolCall, assistant_message, split_tool_calls, tool_message
from garen_infer.llm.types import SamplingParams

BASH_PARAMETERS = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}
TOOLS = [{"type": "function", "function": {"name": "bash", "description": "run", "parameters": BASH_PARAMETERS}}]


@pytest.mark.parametrize(
    "text, content, calls",
    [
        ('<tool_call>\n{"name": "bash", "arguments": {"command": "rg x"}}\n</tool_call>', "",
         [("bash", {"command": "rg x"})]),
        ('Let me look.<tool_call>[{"name": "read", "arguments": {"path": "a"}}, {"name": "bash", '
         '"arguments": {"command": "rg y"}}]</tool_call>',
         "Let me look.", [("read", {"path": "a"}), ("bash", {"command": "rg y"})]),
        ('<tool_call>{"name": "a", "arguments": {}}</tool_call> and <tool_call>{"name": "b", "arguments": '
         '{}}</tool_call>', "and", [("a", {}), ("b", {})]),
        ('<tool_call>{"name": "bash", "arguments": "{\\"command\\": \\"rg z\\"}"}', "",
         [("bash", {"command": "rg z"})]),  # unclosed, string args
        ('<tool_call>{"name": "bash", "parameters": {"command": "rg p"}}</tool_call>', "",
         [("bash", {"command": "rg p"})]),
        ("<tool_call>{'name': 'bash', 'arguments': {'command': 'rg q'},}</tool_call>", "",
         [("bash", {"command": "rg q"})]),  # repaired
        ('{"name": "embed_recall", "arguments": {"scope_query": "lava"}}', "",
         [("embed_recall", {"scope_query": "lava"})]),  # bare JSON
        ('```json\n[{"name": "read", "arguments": {"path": "b"}}]\n```', "", [("read", {"path": "b"})]),
        ('You can call:\n```json\n{"tool_call": {"name": "embed_recall", "arguments": {"scope_query": '
         '"PrP"}}}\n```\nThis returns documents.',
         "You can call:\n\nThis returns documents.", [("embed_recall", {"scope_query": "PrP"})]),  # in prose, wrapped
        ('{"tool_calls": [{"name": "read", "arguments": {"path": "c"}}]}', "", [("read", {"path": "c"})]),
        ("Final ranking:\n1. corpus/a.txt", "Final ranking:\n1. corpus/a.txt", []),
        # no arguments: not a call
        ('Here is data:\n```json\n{"name": "x"}\n```', 'Here is data:\n```json\n{"name": "x"}\n```', []),
        ('{"answer": 42}', '{"answer": 42}', []),  # JSON that is not a call stays text
    ],
)
def test_inline_tool_calls_are_read(text, content, calls):
    got_content, got = split_tool_calls(text)
    assert got_content == content
    assert [(c.name, c.arguments) for c in got] == calls and not any(c.error for c in got)


@pytest.mark.parametrize("block, why", [("<tool_call>%%%</tool_call>", "not valid JSON"),
                                        ('<tool_call>{"arguments": {}}</tool_call>', "needs a 'name'"),
                                         ('<tool_call>{"name": "bash", "arguments": [1]}</tool_call>',
                                          "not a JSON object")])
def test_unreadable_calls_carry_the_reason(block, why):
    _, calls = split_tool_calls(block)
    assert len(calls) == 1 and why in calls[0].error


def _conversation():
    call = ToolCall("bash", {"command": "rg lava"}, id="call_1_0")
    return [
        {"role": "system", "content": "You search."},
        {"role": "user", "content": "Query: lava"},
        assistant_message("", [call, ToolCall("read", {"path": "corpus/a.txt"}, id="call_1_1")]),
        tool_message(call, "corpus/a.txt:1:lava"),
        tool_message(ToolCall("read", {}, id="call_1_1"), "lava flows"),
    ]


def test_fallback_format_for_templates_without_tools():
    chat = fallback_chat(_conversation(), TOOLS)
    assert [m["role"] for m in chat] == ["system", "user", "assistant", "user"]
    assert (
        chat[0]["content"].startswith("You search.")
        and '"name": "bash"' in chat[0]["content"]
        and "<tools>" in chat[0]["content"]
    )
    assert json.loads(chat[2]["content"].split("<tool_call>")[1].split("</tool_call>")[0]) == [
        {"name": "bash", "arguments": {"command": "rg lava"}}, {"name": "read", "arguments": {"path": "corpus/a.txt"}}]
    assert (
        chat[3]["content"]
        == "<tool_response>\ncorpus/a.txt:1:lava\n</tool_response>\n<tool_response>\nlava flows\n</tool_response>"
    )
    # what the model writes back in that format is read by the same parser
    assert split_tool_calls(chat[2]["content"])[1][0].arguments == {"command": "rg lava"}


TOOL_TEMPLATE = (
    "{% if tools %}<|im_start|>system\nTOOLS {{ tools | tojson }}<|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
    "{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{{ c.function | tojson }}</tool_call>{% "
    "endfor %}{% endif %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_native_template_with_tools_and_fallback(tiny_model_dir):
    from transformers import AutoTokenizer

    plain = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert not template_knows_tools(plain)  # the tiny model's ChatML template ignores tools
    text = render_tool_chat(plain, _conversation(), TOOLS)
    assert "<tools>" in text and "<tool_response>" in text

    native = AutoTokenizer.from_pretrained(tiny_model_dir)
    native.chat_template = TOOL_TEMPLATE
    assert template_knows_tools(native)
    text = render_tool_chat(native, _conversation(), TOOLS)
    assert text.startswith("<|im_start|>system\nTOOLS [") and "<tools>" not in text
    calls = [json.loads(block.split("</tool_call>")[0]) for block in text.split("<tool_call>")[1:]]
    assert calls == [{"name": "bash", "arguments": {"command": "rg lava"}},
                     {"name": "read", "arguments": {"path": "corpus/a.txt"}}]
    assert "<|im_start|>tool\nlava flows<|im_end|>" in text and text.endswith("<|im_start|>assistant\n")


def test_transformers_backend_chats_with_tools_and_the_cache_replays(tiny_model_dir, tmp_path):
    from garen_infer.llm.backends.transformers_backend import TransformersBackend

    backend = TransformersBackend(str(tiny_model_dir), device="cpu", batch_size=2)
    cached = CachedBackend(backend, ResponseCache(tmp_path / "cache.sqlite"))
    requests = [(_conversation(), TOOLS), ([{"role": "user", "content": "Query: python"}], TOOLS)]
    params = SamplingParams(max_tokens=8)
    first = cached.chat_with_tools(requests, params)
    assert len(first) == 2 and all(isinstance(c.extra["tool_calls"], list) and c.output_tokens > 0 for c in first)
    again = cached.chat_with_tools(requests, params)
    assert all(c.cached for c in again) and [c.text for c in again] == [c.text for c in first]


def test_openai_backend_sends_tools_and_reads_tool_calls():
    from openai_server import ScriptedServer

    from garen_infer.llm.backends.openai_backend import OpenAIBackend

    server = ScriptedServer()
    try:
        server.answer((200, {
            "choices": [{"message": {"content": None, "tool_calls": [
                {"id": "chatcmpl-tool-9f2", "type": "function",
                 "function": {"name": "bash", "arguments": "{\"command\": \"rg -n lava\"}"}},
                {"id": "chatcmpl-tool-a01", "type": "function", "function": {"name": "read", "arguments": "not json"}},
            ]}}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 30},
        }))
        backend = OpenAIBackend("m", base_url=server.base_url, api_key_env=None, max_retries=0, timeout=5)
        [answer] = backend.chat_with_tools([(_conversation(), TOOLS)], SamplingParams(max_tokens=64))
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
    body = server.requests[0]["body"]
    assert body["tools"] == TOOLS and body["max_tokens"] == 64
    sent = body["messages"][2]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(sent) == {"command": "rg lava"}  # the API's arguments are a JSON string
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "call_1_0", "content": "corpus/a.txt:1:lava"}
    calls = answer.extra["tool_calls"]
    assert (calls[0]["name"], calls[0]["arguments"], calls[0]["error"]) == ("bash", {"command": "rg -n lava"}, None)
    assert calls[1]["name"] == "read" and "not a JSON object" in calls[1]["error"]
    assert (answer.text, answer.input_tokens, answer.output_tokens) == ("", 120, 30)


def test_a_call_the_server_returned_as_content_is_recovered_by_the_agent_role_and_counted(tmp_path):
    """vLLM's hermes parser gives up on a call with broken JSON and returns the reply as plain content; the agent
    role reads it as the offline path does, and the ledger counts it (again on replay from the cache)."""
    from openai_server import ScriptedServer

    from garen_infer.llm.backends.openai_backend import OpenAIBackend
    from garen_infer.llm.ledger import QueryLedger
    from garen_infer.llm.roles import LLMToolChat

    content = (
        'I will search.\n<tool_call>\n{"name": "bash", "arguments": {"command": "rg -n lava",}}\n</tool_call>'
    )
    server = ScriptedServer()
    try:
        server.answer((200, {"choices": [{"message": {"content": content}, "finish_reason": "stop"}], "usage": {}}))
        backend = OpenAIBackend("m", base_url=server.base_url, api_key_env=None, max_retries=0, timeout=5)
        agent = LLMToolChat(CachedBackend(backend, ResponseCache(tmp_path / "cache")))
        [first] = agent.chat([(_conversation(), TOOLS)])
        [again] = agent.chat([(_conversation(), TOOLS)])
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
    for answer in (first, again):
        assert answer.text == "I will search."
        assert [(c["name"], c["arguments"]) for c in answer.extra["tool_calls"]] == [
            ("bash", {"command": "rg -n lava"})
        ]
        ledger = QueryLedger()
        ledger.record("agent", answer)
        assert ledger.summary()["problems"] == {"tool_call_recovered": 1}
    assert again.cached and len(server.requests) == 1
