"""Function calling as plain data: what a model answers in one agent turn, and how tool calls are read from the
text of models that write them inline.

Messages follow the OpenAI chat format that Hugging Face chat templates also read: an assistant message may carry
``tool_calls`` (``{"id", "type": "function", "function": {"name", "arguments"}}``, arguments kept as a dict here),
and each result is a ``{"role": "tool", "tool_call_id", "name", "content"}`` message.

Local models (transformers, vLLM) write calls inline. ``split_tool_calls`` reads the Hermes / Qwen / SmolLM2
convention, ``<tool_call>`` + JSON (one object or a list of objects) + ``</tool_call>``; without tags, a reply that
is nothing but such JSON, or a fenced JSON block that is a call (also wrapped as ``{"tool_call": ...}`` or
``{"function_call": ...}``), as small models write them inside prose. Broken JSON is repaired with json_repair
where possible; a call that still cannot
be read is kept with an ``error`` so the agent can be told what went wrong.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_FENCED = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.DOTALL)


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict = field(default_factory=dict)
    id: str = ""
    error: str | None = None  # why the call could not be read; the agent is told and nothing runs

    def as_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "arguments": self.arguments, "error": self.error}

    @classmethod
    def from_dict(cls, raw: dict) -> ToolCall:
        return cls(raw.get("name") or "", raw.get("arguments") or {}, raw.get("id") or "", raw.get("error"))


@dataclass(frozen=True)
class AssistantTurn:
    """One model answer in an agent loop: its text and the tools it asks to run (none = a final answer)."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    input_tokens: int = 0  # the prompt's length as the backend counted it (0 = not reported)
    output_tokens: int = 0
    truncated_tokens: int = 0  # tokens the backend cut from the prompt's middle to fit its limit
    # the prompt tokens the model may hold, where its server says (a served max_model_len)
    prompt_limit: int | None = None
    refused: bool = False  # the server refused the chat as longer than the model's context: there is no reply

    @classmethod
    def from_completion(cls, completion) -> AssistantTurn:
        extra = completion.extra or {}
        calls = tuple(ToolCall.from_dict(c) for c in extra.get("tool_calls") or ())
        return cls(completion.text or "", calls, completion.input_tokens, completion.output_tokens,
                   completion.truncated_tokens,
                   extra.get("prompt_limit"), bool(extra.get("refused")))


def assistant_message(text: str, calls: list[ToolCall]) -> dict:
    message: dict = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in calls
        ]
    return message


def tool_message(call: ToolCall, content: str) -> dict:
    return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content}


def split_tool_calls(text: str) -> tuple[str, list[ToolCall]]:
    """(the text without its tool-call blocks, the calls in order)."""
    blocks = _BLOCK.findall(text)
    if blocks:
        calls = [call for block in blocks for call in _read_calls(block)]
        return _BLOCK.sub("", text).strip(), calls
    # no tags: a reply that is nothing but a call, or a ```json block that is one (small models wrap calls in prose)
    for match in [re.match(r"\s*(.*?)\s*$", text, re.DOTALL), *_FENCED.finditer(text)]:
        assert match is not None  # the first pattern matches any text
        candidate = match.group(1)
        if not candidate.startswith(("{", "[")):
            continue
        try:
            data = _unwrap(json.loads(candidate))
        except ValueError:
            continue
        if _looks_like_calls(data):
            rest = (text[: match.start()] + text[match.end() :]).strip()
            return rest, _read_calls(json.dumps(data))
    return text, []


def _unwrap(data):
    """``{"tool_call": {...}}``, ``{"tool_calls": [...]}``, ``{"function_call": {...}}``: the call(s) inside."""
    if isinstance(data, dict) and len(data) == 1:
        key, inner = next(iter(data.items()))
        if key in ("tool_call", "tool_calls", "function_call", "function"):
            return inner
    return data


def _looks_like_calls(data) -> bool:
    items = data if isinstance(data, list) else [data]
    return bool(items) and all(
        isinstance(i, dict) and "name" in i and ("arguments" in i or "parameters" in i) for i in items
    )


def _read_calls(block: str) -> list[ToolCall]:
    block = block.strip()
    data = _load_json(block)
    if data is None:
        return [ToolCall("", {}, error=f"the tool call is not valid JSON: {block[:200]}")]
    items = data if isinstance(data, list) else [data]
    calls = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            calls.append(ToolCall("", {},
                                  error=f"a tool call needs a 'name' and 'arguments': {json.dumps(item)[:200]}"))
            continue
        arguments = item.get("arguments", item.get("parameters", {}))
        if isinstance(arguments, str):
            arguments = _load_json(arguments) if arguments.strip() else {}
        if not isinstance(arguments, dict):
            calls.append(ToolCall(item["name"], {}, error="the tool call's 'arguments' is not a JSON object"))
            continue
        calls.append(ToolCall(item["name"], arguments))
    return calls


def _load_json(text: str):
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        import json_repair

        repaired = json_repair.loads(text)
    except Exception:  # json_repair raises assorted errors on hopeless input
        return None
    return repaired if isinstance(repaired, (dict, list)) and repaired else None
