"""The agent's context and its compaction (RARG sec. 3.1, 3.3, 4.1; DCI-Agent-Lite's default Level-3 management).

Level 3 does two things: (1) every tool result is cut to C characters when it enters the context (the tools do
that: ``tool_result_chars``); (2) once the context is longer than a threshold (230K tokens in RARG's runs), only
the results of the most recent tool calls are kept (40 in RARG: GPT calls several tools per turn, so RARG counts
results, not turns) and older ones are replaced by ``[cleared]``. RARG adds two rules: an ``embed_recall`` result
keeps its "scope file -> query" line, so the agent always knows which scopes exist, and the ``<qr_paragraph>``
entry points are cleared from every result at compaction, recent ones included.

The model's own limit comes first: a context longer than ``limit`` tokens (what the agent model's prompt may hold,
its ``max_model_len`` minus the answer's ``max_tokens``) has more of its oldest results cleared, one at a time,
until it fits. An agent's chat is never sent to be cut in the middle: that would drop its newest results, or, on a
server, be refused. The length below is an estimate, so a local backend may still cut what is sent; the loop then
drops that reply and clears to the limit the cut shows (``loop.py``).

The context length is the prompt tokens of the last model call plus its answer, plus a quarter of the characters
added (or minus those cleared) since, about four characters a token; a backend that reports no tokens is estimated
from characters alone. Compaction is deterministic, so a rerun sends the same prompts and is served from the cache.
"""

from __future__ import annotations

from dataclasses import dataclass

from garen_infer.agent.tools import ToolOutcome, strip_paragraphs
from garen_infer.llm.tool_calls import ToolCall, assistant_message, tool_message

CLEARED = "[cleared]"
CHARS_PER_TOKEN = 4


@dataclass
class _Result:
    position: int  # index of the tool message in the context
    scope_line: str | None


class Context:
    def __init__(self, system: str, user: str):
        self.messages: list[dict] = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        self.results: list[_Result] = []
        self.compactions = 0
        self._tokens_seen = 0  # prompt + answer tokens of the last model call (0 = unknown)
        self._chars_then = 0  # the context's characters at that call

    # ---- growing ----------------------------------------------------------------------------------------------
    def add_assistant(self, text: str, calls: list[ToolCall]) -> None:
        self.messages.append(assistant_message(text, calls))

    def add_result(self, call: ToolCall, outcome: ToolOutcome) -> None:
        self.results.append(_Result(len(self.messages), outcome.scope_line))
        self.messages.append(tool_message(call, outcome.text))

    def add_user(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})

    def snapshot(self) -> tuple[dict, ...]:
        """The messages as they are now (copies: later compaction must not change a request already sent)."""
        return tuple(dict(m) for m in self.messages)

    # ---- measuring and compacting -----------------------------------------------------------------------------
    def chars(self) -> int:
        return sum(len(m.get("content") or "") + len(str(m.get("tool_calls") or "")) for m in self.messages)

    def saw_model_call(self, input_tokens: int, output_tokens: int, chars_sent: int) -> None:
        self._tokens_seen, self._chars_then = input_tokens + output_tokens, chars_sent

    def length_estimate(self) -> int:
        chars = self.chars()
        if self._tokens_seen:
            return max(self._tokens_seen + (chars - self._chars_then) // CHARS_PER_TOKEN, 0)
        return chars // CHARS_PER_TOKEN

    def compact_if_long(self, threshold: int, keep_results: int, limit: int | None = None) -> bool:
        """Compact when the context is longer than ``threshold`` tokens, then clear older results until it is no
        longer than ``limit`` (None: no limit) or no result is left to clear; True when anything changed."""
        changed = self.length_estimate() > threshold and self.compact(keep_results)
        keep = min(keep_results, len(self.results))
        while limit is not None and keep > 0 and self.length_estimate() > limit:
            keep -= 1
            changed = self.compact(keep) or changed
        if changed:
            self.compactions += 1
        return changed

    def compact(self, keep_results: int) -> bool:
        first_kept = max(len(self.results) - keep_results, 0)
        changed = False
        for k, result in enumerate(self.results):
            message = self.messages[result.position]
            if k < first_kept:
                content = result.scope_line or CLEARED
            else:
                content = strip_paragraphs(message["content"])
            if content != message["content"]:
                message["content"] = content
                changed = True
        return changed
