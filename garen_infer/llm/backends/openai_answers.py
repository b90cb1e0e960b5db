"""An OpenAI-compatible server's answers read: every field checked before it becomes a Completion (and so before
it is cached), one GarenError line naming the server for a body that is not what the API promises; the yes/no
label among listed logprobs; a tool call; a model card's context length; the wait an error body asks for."""

from __future__ import annotations

import json
import math
import re

from garen_infer.errors import GarenError
from garen_infer.llm.backends.yes_no_scoring import MISSING_LOGPROB, unlisted_logprob

# what a field of an answer must be
KIND_WORDS = {str: "text", int: "a whole number", dict: "an object", list: "a list"}
# Where a 429's body names its wait: Google's RetryInfo ("retryDelay": "38s"), or its text ("Please retry in 38.2s.",
# OpenAI's "Please try again in 1.5s" or "in 120ms")
RETRY_DELAY_FIELD = re.compile(r'"retryDelay"\s*:\s*"([0-9.]+)s"')
RETRY_DELAY_TEXT = re.compile(r"(?:retry|try again) in ([0-9.]+)\s*(ms|s)\b", re.IGNORECASE)
THOUGHT_PARTS = ("reasoning", "thinking")  # content parts that hold a thought, never the answer


def label_logprob(entries: list[tuple[str, float]], label: str) -> float:
    """The logprob of ``label`` among (token, logprob) alternatives: the exact token if listed, else the
    best-ranked token equal to it after stripping whitespace and lowercasing, else -10 or the lowest listed
    logprob if that is lower (a missing label never outranks a listed one)."""
    exact = [lp for token, lp in entries if token == label]
    if exact:
        return max(exact)
    loose = [lp for token, lp in entries if token.strip().lower() == label]
    return max(loose) if loose else unlisted_logprob(lp for _, lp in entries)


def call_from_openai(raw: dict) -> dict:
    """A ``tool_calls`` entry of a response as ToolCall's dict; arguments that are not a JSON object are an error."""
    function = raw.get("function") or {}
    name, arguments = function.get("name") or "", function.get("arguments") or "{}"
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        return {"id": raw.get("id", ""), "name": name, "arguments": {},
                "error": f"the arguments are not a JSON object: {str(arguments)[:200]}"}
    return {"id": raw.get("id", ""), "name": name, "arguments": parsed, "error": None}


def listed_context_length(raw: bytes, model: str) -> int | None:
    """``max_model_len`` of ``model`` in a ``/models`` list (vLLM's and SGLang's model cards), or of the base model
    its card names as ``parent`` (a LoRA adapter's card lists none); None when the list does not say."""
    try:
        listed = json.loads(raw).get("data")
    except (ValueError, AttributeError):
        return None
    cards = {c.get("id"): c for c in listed if isinstance(c, dict)} if isinstance(listed, list) else {}
    card = cards.get(model) or {}
    for entry in (card, cards.get(card.get("parent")) or {}):
        length = entry.get("max_model_len")
        if isinstance(length, int) and not isinstance(length, bool) and length > 0:
            return length
    return None


def content_text(message: dict, where: str) -> tuple[str, bool]:
    """The answer's text, and whether the server sent it as a list of content parts: their text parts joined, the
    parts that hold a thought left out; anything else is one GarenError line."""
    content = message.get("content")
    if not isinstance(content, list):
        return checked_field(message, "content", str, where) or "", False
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in THOUGHT_PARTS:
            continue
        if kind != "text" or not isinstance(part.get("text"), str):
            raise GarenError(f"the server at {where} answered with a content part that is not text: "
                             f"{str(part)[:200]!r}")
        texts.append(part["text"])
    return "".join(texts), True


def first_choice(answer, where: str) -> dict:
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not choices or not isinstance(choices, list):
        raise GarenError(f"the server at {where} answered without any 'choices': {str(answer)[:200]}")
    if not isinstance(choices[0], dict):
        raise GarenError(f"the server at {where} answered with a choice that is not an object: {str(choices[0])[:200]}")
    return choices[0]


def choices_in_order(answer, count: int, where: str) -> list[dict]:
    """The ``count`` choices of a completions answer in the order of its prompts (each names its prompt by
    ``index``); a missing, repeated or extra one is one GarenError line."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        raise GarenError(f"the server at {where} answered without a list of 'choices': {str(answer)[:200]}")
    by_index = {c.get("index"): c for c in choices}
    if len(choices) != count or set(by_index) != set(range(count)):
        raise GarenError(
            f"the server at {where} answered {len(choices)} choices to {count} "
            "prompts in one /completions request: it does not take a prompt list as vLLM and SGLang do; set "
            "yes_no_per_request: 1"
        )
    return [by_index[i] for i in range(count)]


def answer_message(answer, where: str) -> dict:
    return checked_field(first_choice(answer, where), "message", dict, where) or {}


def checked_field(mapping: dict, name: str, kind: type, where: str):
    """``mapping[name]`` when it is a ``kind`` (None when absent or null); anything else is one GarenError line."""
    value = mapping.get(name)
    if value is None or (isinstance(value, kind) and not isinstance(value, bool)):
        return value
    raise GarenError(f"the server at {where} answered with a '{name}' that is not {KIND_WORDS[kind]}: "
                     f"{str(value)[:200]!r}")


def token_usage(answer: dict, where: str) -> tuple[int, int]:
    """(prompt tokens, answer tokens) from ``usage``; 0 for a count the server leaves out, an error for one that is
    not a whole number (checked here, before the answer is cached, since the ledger adds them up)."""
    usage = checked_field(answer, "usage", dict, where) or {}
    prompt_tokens, answer_tokens = (checked_field(usage, field, int, where) or 0
                                    for field in ("prompt_tokens", "completion_tokens"))
    if min(prompt_tokens, answer_tokens) < 0:
        raise GarenError(f"the server at {where} answered with a negative token count in 'usage': {str(usage)[:200]}")
    return prompt_tokens, answer_tokens


def logprob_entry(entry: dict, where: str) -> tuple[str, float]:
    """(token, logprob) of one listed alternative; a logprob that is not a finite number is one GarenError line."""
    logprob = entry.get("logprob", MISSING_LOGPROB)
    if isinstance(logprob, bool) or not isinstance(logprob, (int, float)) or math.isnan(logprob) or logprob > 0:
        raise GarenError(f"the server at {where} answered with a logprob that is not a number at most 0: "
                         f"{str(entry)[:200]}")
    return str(entry.get("token", "")), float(logprob)


def error_detail(body: str) -> str:
    """The message of an error body (OpenAI's {"error": {"message": ...}}, Gemini's list of those), else its text."""
    try:
        data = json.loads(body)
    except ValueError:
        return body[:300]
    if isinstance(data, list) and data:
        data = data[0]
    message = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(message, dict):
        message = message.get("message", message)
    return str(message)[:300]


def retry_delay(body: str) -> float | None:
    """The seconds an error body asks to wait (for a 429 without Retry-After), or None when it names none."""
    found = RETRY_DELAY_FIELD.search(body)
    if found:
        return float(found.group(1))
    found = RETRY_DELAY_TEXT.search(body)
    if found:
        return float(found.group(1)) / (1000 if found.group(2).lower() == "ms" else 1)
    return None
