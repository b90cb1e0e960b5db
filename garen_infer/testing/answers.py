"""What real models write, as a catalogue of answer shapes, and a scripted model that answers with them.

Each ``Shape`` turns the answer a perfect model would give into what a real one often gives instead (prose around a
ranking, a markdown header, a thought closed or not, fenced JSON that quotes fenced code, JSON cut at ``max_tokens``,
ids repeated or missing, a refusal, a tool call the server could not parse, an empty answer cut at ``max_tokens``),
and names what the ledger counts for it. ``ScriptedModel`` is a backend (``generate``, ``score_yes_no``,
``chat_with_tools``) that recognises the prompt it is sent (a listwise ranking, a JSON request, an agent turn, a
yes/no question), writes the perfect answer and reshapes it with a shape drawn from the prompt's hash: the same
prompt always gets the same answer, so runs are deterministic and cacheable. It is a stand-in for the model only;
every parser, method and stage it talks to is the real one. docs/design/answers.md tells what each shape does to
a run.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from garen_infer.llm.types import Chat, Completion, SamplingParams


@dataclass(frozen=True)
class Shape:
    name: str
    write: Callable[[Any], tuple[Any, str]]  # the perfect answer (ids, a label) -> (content, finish)
    counted: tuple[str, ...] = ()  # what the ledger counts for it where it is read (listwise: rank_llm's rule)


def _ranking(ids: list[int]) -> str:
    return " > ".join(f"[{i}]" for i in ids)


# ---- listwise rankings: the perfect answer is the ids, best first ----------------------------------------------
RANKING_SHAPES = (
    Shape("plain", lambda ids: (_ranking(ids), "stop")),
    Shape("prose_around", lambda ids: (f"Based on relevance to the query, here is the ranking:\n\n{_ranking(ids)}\n\n"
                                       "Let me know if you need an explanation.", "stop")),
    Shape("markdown_header", lambda ids: (f"**Reasoning Trace:** Step 1: find what the query needs. Step 2: passage "
                                          f"[{ids[-1]}] is off topic.\n\n**Document "
                                          f"Ranking:**\n{_ranking(ids)}", "stop")),
    Shape("hash_header",
          lambda ids: (f"## Reasoning Trace\nStep 1: the query asks for 2 things.\n\n## Document Ranking\n"
                       f"{_ranking(ids)}", "stop")),
    Shape("think_closed", lambda ids: (f"<think>\nPassage [{ids[-1]}] mentions the topic only in passing; 3 others are "
                                       f"closer.\n</think>\n\n{_ranking(ids)}", "stop")),
    Shape("think_unclosed", lambda ids: (f"<think>\nLet me compare passage [{ids[-1]}] with passage [{ids[0]}]: the "
                                         "first one describes", "length"),
          ("thought_without_answer", "cut_at_max_tokens")),
    Shape("duplicates", lambda ids: (_ranking([ids[0], *ids]), "stop"), ("ids_duplicate",)),
    Shape("missing", lambda ids: (_ranking(ids[: len(ids) // 2]), "stop"), ("ids_missing", "ids_appended")),
    Shape("refusal", lambda ids: ("I'm sorry, but I can't help with ranking these documents.", "stop"),
          ("unreadable",)),
    Shape("empty_cut", lambda ids: ("", "length"), ("unreadable", "cut_at_max_tokens")),
    Shape("number_content", lambda ids: (ids[0], "stop"), ("content_not_text", "ids_missing", "ids_appended")),
)


# ---- JSON answers (group summaries, node descriptions, LATTICE slates): the perfect answer is an object -------------
def _fenced_with_code(obj: dict) -> str:
    quoted = dict(obj)
    key = "reasoning" if "reasoning" in obj else "summary"
    quoted[key] = f"{obj.get(key, '')} For example:\n```python\ndef first(items):\n    return items[0]\n```\nas shown."
    return f"```json\n{json.dumps(quoted, indent=2)}\n```"


JSON_SHAPES = (
    Shape("plain", lambda obj: (json.dumps(obj), "stop")),
    Shape("fenced_with_prose",
          lambda obj: (f"Sure! Here is the JSON you asked for:\n```json\n{json.dumps(obj, indent=2)}\n```", "stop")),
    Shape("fenced_code_inside", lambda obj: (_fenced_with_code(obj), "stop")),
    Shape("think_closed",
          lambda obj: ("<think>\nThe members share one theme; 2 of them "
                       f"differ.\n</think>\n\n{json.dumps(obj)}", "stop")),
    Shape("cut_json", lambda obj: (json.dumps(obj)[: 25], "length"), ("cut_at_max_tokens",)),
    Shape("refusal", lambda obj: ("I cannot produce that summary.", "stop"), ("unreadable",)),
    Shape("empty_cut", lambda obj: ("", "length"), ("cut_at_max_tokens",)),
)


# ---- agent turns: the perfect answer is (tool name, arguments), or the final ranking's text -----------------------
def _native(answer) -> tuple[object, str]:
    return answer, "tool_calls" if isinstance(answer, tuple) else "stop"


def _in_content(answer) -> tuple[object, str]:
    if not isinstance(answer, tuple):
        return answer, "stop"
    name, arguments = answer
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>", "stop"


def _invalid_call(answer) -> tuple[object, str]:
    if not isinstance(answer, tuple):
        return answer, "stop"
    name, arguments = answer
    return f"<tool_call>\n{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})\n</tool_call>", "stop"


TOOL_SHAPES = (
    Shape("native_call", _native),
    Shape("call_in_content", _in_content, ("tool_call_recovered",)),
    Shape("invalid_call_in_content", _invalid_call, ("tool_call_recovered", "unreadable")),
    # + unreadable when it is the final answer
    Shape("empty_cut", lambda answer: ("", "length"), ("cut_at_max_tokens",)),
)

SCORE_SHAPES = (
    Shape("probability", lambda p: (p, "stop")),
    Shape("nan", lambda p: (float("nan"), "stop"), ("not_a_number",)),
)

CATALOGUE = {"ranking": RANKING_SHAPES, "json": JSON_SHAPES, "tools": TOOL_SHAPES, "score": SCORE_SHAPES}


def _digest(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:12], 16)


def _content(chat: Chat) -> str:
    return "\n".join(m.get("content") or "" for m in chat if isinstance(m.get("content"), str))


@dataclass
class ScriptedModel:
    """A backend that answers like real models do. ``shapes`` limits each kind of answer to the shapes named
    (``{"ranking": ("refusal",)}``); every kind not named uses its whole catalogue. ``used`` counts the shapes
    it answered with, by kind."""

    shapes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    id: str = "scripted-answers"
    used: Counter = field(default_factory=Counter)

    def _shape(self, kind: str, prompt: str, params: SamplingParams | None = None) -> Shape:
        """The shape for this prompt; a sampled retry (another seed) may draw another."""
        names = self.shapes.get(kind)
        pool = [s for s in CATALOGUE[kind] if names is None or s.name in names]
        sampled = f"{params.temperature}:{params.seed}" if params is not None and params.temperature > 0 else ""
        shape = pool[_digest(sampled + prompt) % len(pool)]
        self.used[(kind, shape.name)] += 1
        return shape

    def generate(self, chats: list[Chat], params: SamplingParams) -> list[Completion]:
        out = []
        for chat in chats:
            prompt = _content(chat)
            kind, perfect = (
                ("json", perfect_json(prompt))
                if "JSON" in prompt
                else ("ranking", perfect_ranking(_content(chat[1:])))
            )
            content, finish = self._shape(kind, prompt, params).write(perfect)
            out.append(Completion(text=content, input_tokens=len(prompt) // 4, output_tokens=len(str(content)) // 4,
                                  finish_reason=finish))
        return out

    def score_yes_no(self, chats: list[Chat], assistant_prefix: str) -> list[Completion]:
        out = []
        for chat in chats:
            prompt = _content(chat)
            score, finish = self._shape("score", prompt).write((_digest("p" + prompt) % 1000) / 1000)
            out.append(Completion(score=score, input_tokens=len(prompt) // 4, output_tokens=1, finish_reason=finish))
        return out

    def score_pairs(self, pairs: list[tuple[str, str]]) -> list[Completion]:
        return self.score_yes_no([[{"role": "user", "content": f"{q}\n{t}"}] for q, t in pairs], "")

    def chat_with_tools(self, requests: list[tuple[Chat, list[dict]]], params: SamplingParams) -> list[Completion]:
        out = []
        for chat, _ in requests:
            prompt = _content(chat)
            content, finish = self._shape("tools", prompt).write(perfect_turn(chat))
            calls = []
            if isinstance(content, tuple):  # the server parsed the call
                calls = [{"id": "srv-0", "name": content[0], "arguments": content[1], "error": None}]
                content = ""
            out.append(Completion(text=content, input_tokens=len(prompt) // 4, output_tokens=len(content) // 4 + 1,
                                  finish_reason=finish, extra={"tool_calls": calls}))
        return out


# ---- the perfect answers --------------------------------------------------------------------------------------
_CANDIDATE = re.compile(r"^\[(\d+)\]\. ", re.M)
_PATH = re.compile(r"corpus/[\w.-]+?\.txt")


_QUERY = re.compile(r"Search Query: (.*?)\.\s*Rank|\[Query\] (.*?) \[Documents\]|## Query\n(.*?)\n|Query: "
                    r"(.*?)\.?\n", re.S)


def _overlap(query: str, text: str) -> int:
    words = set(re.findall(r"[a-z]{4,}", text.lower()))
    return sum(w in words for w in set(re.findall(r"[a-z]{4,}", query.lower())))


def _passages(prompt: str, marker: re.Pattern) -> dict[int, str]:
    """Each id's passage: the text from its marker to the next one."""
    found = list(marker.finditer(prompt))
    out: dict[int, str] = {}
    for m, nxt in zip(found, [*found[1:], None]):  # the first: later ones are the answer format's examples
        out.setdefault(int(m.group(1)), prompt[m.end(): nxt.start() if nxt else len(prompt)])
    return out


def _query(prompt: str) -> str:
    match = _QUERY.search(prompt)
    return next((g for g in match.groups() if g), "") if match else ""


def _without(prompt: str, query: str) -> str:
    """The prompt without its query, so that no passage holds it."""
    return prompt.replace(query, " ") if query else prompt


def perfect_ranking(prompt: str) -> list[int]:
    """The window's ids by how many of the query's words each passage holds (ties in an order drawn from the
    prompt): a model with a crude but real notion of relevance. ``prompt``: the chat without its system message."""
    query = _query(prompt)
    passages = {i: t for i, t in _passages(_without(prompt, query), re.compile(r"\[(\d+)\]")).items() if i > 0}
    return sorted(passages, key=lambda i: (-_overlap(query, passages[i]), _digest(f"{i}:{prompt}"))) or [1]


def perfect_json(prompt: str) -> dict:
    """A LATTICE slate's scores (query-word overlap, as ``perfect_ranking``), or a summary / node description."""
    if "relevance_scores" in prompt:
        query = _query(prompt)
        candidates = _passages(_without(prompt, query), _CANDIDATE)
        scores = [[i, min(100, 20 * _overlap(query, text))] for i, text in sorted(candidates.items())]
        return {"reasoning": "Each candidate is judged on what the query needs.",
                "ranking": [i for i, _ in sorted(scores, key=lambda s: -s[1])], "relevance_scores": scores}
    words = re.findall(r"[a-z]{5,}", prompt.split("\n", 2)[-1].lower())
    common = [w for w, _ in Counter(words).most_common(3)] or ["documents"]
    return {"concept": " ".join(common), "summary": f"Documents about {', '.join(common)}. They describe each in turn."}


def perfect_turn(chat: Chat):
    """An agent's turn: a search first, then the final answer naming the files its results showed."""
    if not any(m["role"] == "tool" for m in chat):
        query = chat[1]["content"].split("\n", 1)[0].removeprefix("Query: ")
        word = max(re.findall(r"[A-Za-z]{4,}", query) or ["the"], key=len).lower()
        return "bash", {"command": f"rg -il {word} corpus"}
    seen = list(dict.fromkeys(p for m in chat if m["role"] == "tool" for p in _PATH.findall(m.get("content") or "")))
    return "Final ranking:\n" + "".join(f"{k}. {p}\n" for k, p in enumerate(seen[:10], 1))
