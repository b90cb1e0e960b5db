"""Chats with tools for local models (transformers and vLLM render them the same way).

A chat template that knows tools (Qwen3, Llama 3.1+, Mistral, Hermes, ...) gets them through
``apply_chat_template(..., tools=...)`` and renders the calls and results of earlier turns itself. A template that
ignores tools (SmolLM2's, plain ChatML) gets the documented fallback below instead: the tool schemas go into the
system message with the format to answer in (the Hermes / SmolLM2 convention: a JSON list of calls between
``<tool_call>`` tags), earlier calls are written into the assistant text in that format, and tool results come
back as a user message with ``<tool_response>`` blocks. Whether a template knows tools is found out by rendering a
probe chat with and without a tool: a template that ignores tools renders both the same.
"""

from __future__ import annotations

import json

from garen_infer.llm.backends.chat_format import apply_template, render_chat
from garen_infer.llm.tool_calls import split_tool_calls
from garen_infer.llm.types import Chat, Completion

# The fallback's instructions (a prompt, so it is data; no random text, so caching works).
FALLBACK_TOOLS_PROMPT = (
    "You can call the tools described by these JSON schemas:\n<tools>\n{tools}\n</tools>\n"
    "To call tools, reply with a JSON list of calls between tool_call tags, for example\n"
    '<tool_call>\n[{{"name": "TOOL_NAME", "arguments": {{"ARGUMENT": "VALUE"}}}}]\n</tool_call>\n'
    "Each result comes back in a <tool_response> block. A reply without a tool call is your final answer."
)
_PROBE = [{"role": "user", "content": "ping"}]
_PROBE_TOOL = {"type": "function", "function": {"name": "probe", "description": "probe",
                                                "parameters": {"type": "object", "properties": {}}}}


def template_knows_tools(tokenizer) -> bool:
    known = getattr(tokenizer, "_garen_knows_tools", None)
    if known is None:
        known = False
        if getattr(tokenizer, "chat_template", None):
            try:
                with_tool = apply_template(tokenizer, _PROBE, tools=[_PROBE_TOOL])
                without = apply_template(tokenizer, _PROBE)
                known = with_tool != without
            except Exception:  # a template may raise on the tools argument
                known = False
        tokenizer._garen_knows_tools = known
    return known


def render_tool_chat(tokenizer, chat: Chat, tools: list[dict]) -> str:
    """The prompt text for a chat whose model may call ``tools`` (OpenAI-style function schemas)."""
    if template_knows_tools(tokenizer):
        hf_chat = [_for_template(m) for m in chat]
        try:
            return apply_template(tokenizer, hf_chat, tools=tools)
        except Exception:  # e.g. a template that rejects a system turn: the fallback still works
            pass
    return render_chat(tokenizer, fallback_chat(chat, tools))


def _for_template(message: dict) -> dict:
    message = dict(message)
    if message.get("content") is None:
        message["content"] = ""
    return message


def fallback_chat(chat: Chat, tools: list[dict]) -> Chat:
    """The same conversation with tools written into plain text turns (see the module docstring)."""
    schemas = json.dumps([t.get("function", t) for t in tools], ensure_ascii=False)
    spec = FALLBACK_TOOLS_PROMPT.format(tools=schemas)
    out: Chat = []
    if chat and chat[0]["role"] == "system":
        out.append({"role": "system", "content": f"{chat[0]['content']}\n\n{spec}"})
        rest = chat[1:]
    else:
        out.append({"role": "system", "content": spec})
        rest = chat
    for message in rest:
        role = message["role"]
        if role == "assistant" and message.get("tool_calls"):
            calls = [
                {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                for c in message["tool_calls"]
            ]
            text = (message.get("content") or "").strip()
            block = "<tool_call>\n" + json.dumps(calls, ensure_ascii=False) + "\n</tool_call>"
            out.append({"role": "assistant", "content": f"{text}\n{block}" if text else block})
        elif role == "tool":
            response = f"<tool_response>\n{message['content']}\n</tool_response>"
            if out[-1]["role"] == "user" and out[-1].get("_responses"):
                out[-1]["content"] += "\n" + response  # results of one turn share one user message
            else:
                out.append({"role": "user", "content": response, "_responses": True})
        else:
            out.append({"role": role, "content": message.get("content") or ""})
    return [{"role": m["role"], "content": m["content"]} for m in out]


def with_tool_calls(completion: Completion) -> Completion:
    """Move the calls written in a local model's text into ``extra["tool_calls"]``."""
    text, calls = split_tool_calls(completion.text)
    completion.text = text
    completion.extra = {**(completion.extra or {}), "tool_calls": [c.as_dict() for c in calls]}
    return completion
