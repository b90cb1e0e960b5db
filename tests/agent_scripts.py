"""A scripted policy model for the RARG agent's tests: a test double for the LLM only (the loop, the tools, the
sandbox, ripgrep and the embedder under test are all real).

``script(query, turn, chat)`` returns the reply of that turn: ``(text, [(tool name, arguments), ...])``. The
double works as a role (``chat``) and as a backend (``chat_with_tools``, with an ``id``), so tests can put the
response cache between it and the loop. It records every request it receives.
"""

from __future__ import annotations

from garen_infer.errors import GarenError
from garen_infer.llm.types import Completion


def query_of(chat) -> str:
    return chat[1]["content"].split("\n", 1)[0].removeprefix("Query: ")


def turn_of(chat) -> int:
    return 1 + sum(m["role"] == "assistant" for m in chat)


class ScriptedPolicy:
    """``cut_at``: the prompt tokens its backend keeps, as a local backend does by cutting a longer prompt's middle
    (the answer says how many tokens were cut)."""

    def __init__(self, script, fail_after: int | None = None, name: str = "scripted", cut_at: int | None = None):
        self.script, self.fail_after, self.cut_at = script, fail_after, cut_at
        self.id = self.name = f"scripted:{name}"
        self.requests: list[tuple[list, list]] = []

    def chat(self, requests) -> list[Completion]:
        out = []
        for chat, tools in requests:
            if self.fail_after is not None and len(self.requests) >= self.fail_after:
                raise GarenError("the scripted model went away")
            self.requests.append((chat, tools))
            text, calls = self.script(query_of(chat), turn_of(chat), chat)
            tokens = sum(len(m.get("content") or "") for m in chat) // 4
            kept = tokens if self.cut_at is None else min(tokens, self.cut_at)
            out.append(
                Completion(
                    text=text,
                    input_tokens=kept,
                    output_tokens=1 + len(text) // 4,
                    truncated_tokens=tokens - kept,
                    # servers invent ids; the loop must not let them into later prompts
                    extra={
                        "tool_calls": [
                            {"id": f"srv-{len(self.requests)}-{k}", "name": n, "arguments": a, "error": None}
                            for k, (n, a) in enumerate(calls)
                        ]
                    },
                )
            )
        return out

    def chat_with_tools(self, requests, params) -> list[Completion]:
        return self.chat(requests)


def answer(*paths: str) -> tuple[str, list]:
    return "Final ranking:\n" + "".join(f"{k}. {p}\n" for k, p in enumerate(paths, 1)), []


def call(name: str, **arguments) -> tuple[str, list]:
    return "", [(name, arguments)]


def sequence(*turns, final=None):
    """A script that plays ``turns`` in order (each a reply or a function of the query), then ``final``."""

    def script(query, turn, chat):
        if turn <= len(turns):
            reply = turns[turn - 1]
            return reply(query) if callable(reply) else reply
        return final(query) if callable(final) else (final or answer())

    return script
