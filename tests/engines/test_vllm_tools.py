"""Agent turns (chat with tools, RARG) through vLLM give the transformers backend's answers: the same rendered
prompt (the chat template with tools, or the fallback format when the template has none), the same greedy text,
the same tool calls read from it."""

from __future__ import annotations

from garen_infer.agent.prompts import USER_PROMPT, system_prompt, tool_schemas
from garen_infer.llm.tool_calls import ToolCall, assistant_message, tool_message
from garen_infer.llm.types import SamplingParams


def _agent_chats():
    first = [{"role": "system", "content": system_prompt(10, True, False)},
             {"role": "user", "content": USER_PROMPT.format(query="why do volcanoes erupt")}]
    call = ToolCall("embed_recall", {"scope_query": "why do volcanoes erupt"}, id="call_1_0")
    later = first + [assistant_message("", [call]), tool_message(call, "scopes/scope_1.txt -> why do volcanoes erupt")]
    return [first, later]


def test_tool_turns_equal_transformers(offline, transformers_backend):
    requests = [(chat, tool_schemas()) for chat in _agent_chats()]
    params = SamplingParams(max_tokens=48)
    ours = offline.chat_with_tools(requests, params)
    ref = transformers_backend.chat_with_tools(requests, params)
    for a in ours:
        print(repr(a.text), a.extra["tool_calls"])
    assert [c.text for c in ours] == [c.text for c in ref]
    assert [c.extra["tool_calls"] for c in ours] == [c.extra["tool_calls"] for c in ref]
    assert [c.input_tokens for c in ours] == [c.input_tokens for c in ref] and ours[1].input_tokens > ours[
        0
    ].input_tokens
