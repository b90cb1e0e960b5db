"""A scripted OpenAI-compatible server on 127.0.0.1 (stdlib only) and the answers real servers give, for tests of
the openai backend: each request takes the next scripted (status, body, delay, headers) and the last one keeps
answering. A body is a JSON value, a function of the request's body (which may return ``Status(code, body)`` to
answer with another status), ``Raw`` bytes sent as they are, or ``Trickle`` bytes sent one at a time after the
headers, as a stalled proxy or an overloaded server does. ``GET /v1/models`` answers with ``models`` (status,
body): by default a 404, as a server without a model list; ``model_list`` is vLLM's and SGLang's.

The shapes below are what vLLM, OpenAI and Gemini answer (their documented error bodies): a 429 whose body names
the wait (Gemini's RetryInfo) and no Retry-After header, vLLM's 400 for a prompt over the context length, an
answer cut at ``max_tokens`` with empty content (a thinking model that spent its tokens thinking), and malformed
bodies."""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Raw:
    """A body sent byte for byte (not JSON-encoded)."""

    data: bytes


@dataclass(frozen=True)
class Status:
    """What a body function answers with when it is not a 200."""

    code: int
    body: object


@dataclass(frozen=True)
class Trickle:
    """A body sent one byte every ``seconds`` after the headers (its length announced, so the client waits)."""

    data: bytes
    seconds: float


def chat_answer(text="Yes.", prompt_tokens=7, completion_tokens=2, finish_reason="stop"):
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}}


def thought_cut_at_max_tokens(max_tokens=256):
    """A thinking model that spent every answer token thinking: no content, ``finish_reason`` length (Gemini 2.5
    counts thoughts in max_tokens; vLLM with a reasoning parser puts the thought in ``reasoning_content``)."""
    answer = chat_answer(None, 40, max_tokens, "length")
    answer["choices"][0]["message"]["reasoning_content"] = "Okay, let me think about which passage"
    return answer


def model_list(*cards):
    """vLLM's and SGLang's ``GET /v1/models``: one card per (id, max_model_len, parent) served; a LoRA adapter's
    card lists no ``max_model_len`` and names its base model as ``parent``."""
    return {"object": "list", "data": [
        {"id": name, "object": "model", "owned_by": "vllm", "root": name, "parent": parent, "max_model_len": length}
        for name, length, parent in cards]}


def quota_exceeded(seconds=0.05):
    """Gemini's 429 through its OpenAI-compatible endpoint: a list of errors, the wait in RetryInfo, no header."""
    return [{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED",
                       "message": f"You exceeded your current quota. Please retry in {seconds}s.",
                       "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo",
                                    "retryDelay": f"{seconds}s"}]}}]


def context_too_long(limit=4096, asked=5000):
    """vLLM's 400 for a prompt and answer over ``max_model_len``."""
    return {"object": "error", "type": "BadRequestError", "param": None, "code": 400,
            "message": f"This model's maximum context length is {limit} tokens. However, you requested {asked} tokens "
                       "in the messages. Please reduce the length of the messages or completion."}


class ScriptedServer:
    """Records each request and answers with ``script`` items in turn: (status, body, delay s, headers).
    ``kill_at=N``: the server dies as its Nth request arrives, as a killed ``vllm serve`` would: the requests in
    flight get no answer and the port refuses connections from then on."""

    def __init__(self, kill_at: int | None = None):
        self.requests, self.script, self.in_flight, self.max_in_flight, self.answered = [], [], 0, 0, 0
        self.models: tuple[int, object] = (404, {"error": {"message": "Not Found"}})
        self.gets: list[str] = []
        self.kill_at, self.killed = kill_at, threading.Event()
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # http.server's naming
                with owner.lock:
                    owner.gets.append(self.path)
                    status, answer = owner.models if self.path.rstrip("/").endswith("/models") else (404, {})
                raw = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_POST(self):  # http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with owner.lock:
                    owner.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                    status, answer, delay, headers = owner.script.pop(0) if len(owner.script) > 1 else owner.script[0]
                    owner.in_flight += 1
                    owner.max_in_flight = max(owner.max_in_flight, owner.in_flight)
                    if owner.kill_at is not None and len(owner.requests) >= owner.kill_at and not owner.killed.is_set():
                        owner.killed.set()
                        threading.Thread(target=owner.stop).start()
                time.sleep(delay)
                if callable(answer):
                    answer = answer(body)
                if isinstance(answer, Status):
                    status, answer = answer.code, answer.body
                raw = answer.data if isinstance(answer, (Raw, Trickle)) else json.dumps(answer).encode()
                # leave the count before the answer goes out: once the client has it, it may send its next request
                # before this thread runs again, and a count left afterwards would then read one too many
                with owner.lock:
                    owner.in_flight -= 1
                    if owner.killed.is_set():
                        self.close_connection = True
                        return  # dead: no answer, the connection just closes
                    owner.answered += status == 200
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    if isinstance(answer, Trickle):
                        for byte in raw:
                            self.wfile.write(bytes([byte]))
                            self.wfile.flush()
                            time.sleep(answer.seconds)
                    else:
                        self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up first
                    pass

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True  # a trickling answer the client gave up on does not hold the test's end
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def answer(self, *items):
        """Items are (status, body[, delay[, headers]]); the last one keeps answering."""
        self.script = [tuple(i) + (0.0, {})[len(i) - 2 :] for i in items]


class VllmYesNo:
    """Yes/no answers as ``vllm serve`` gives them on both of its paths, for one model's ``tokenizer``: a chat is
    rendered by the tokenizer's own template as vLLM renders it (``add_generation_prompt``,
    ``continue_final_message``, ``chat_template_kwargs``); a completions request's ``prompt`` (a text or a list)
    is read as it is, one choice per prompt with its ``index``. Each prompt's P(yes) is drawn from its text, so the
    two paths score alike exactly when they show the model the same text; prompt tokens are the tokenizer's count.
    Among the 20 alternatives are " Yes" and "No", which the label matching must pass over."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.lock = threading.Lock()

    def logprobs(self, text: str) -> dict[str, float]:
        p = (int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) + 0.5) / 16**8
        listed = {"yes": math.log(p), "no": math.log(1 - p), " Yes": math.log(p) - 1.5, "No": math.log(1 - p) - 2.0}
        return listed | {f"w{i}": -8.0 - i for i in range(16)}

    def count(self, text: str) -> int:
        with self.lock:
            return len(self.tokenizer(text, add_special_tokens=False).input_ids)

    def __call__(self, body: dict) -> dict:
        if "prompt" in body:
            prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
            choices = []
            for index, prompt in enumerate(prompts):
                listed = self.logprobs(prompt)
                token = max(listed, key=listed.get)
                choices.append({"index": index, "text": token, "finish_reason": "length", "logprobs": {
                    "tokens": [token], "token_logprobs": [listed[token]], "top_logprobs": [listed],
                    "text_offset": [0]}})
            return {"object": "text_completion", "choices": choices,
                    "usage": {"prompt_tokens": sum(map(self.count, prompts)), "completion_tokens": len(prompts)}}
        text = self.tokenizer.apply_chat_template(
            body["messages"], tokenize=False, add_generation_prompt=body.get("add_generation_prompt", True),
            continue_final_message=body.get("continue_final_message", False), **body.get("chat_template_kwargs", {}))
        listed = self.logprobs(text)
        token = max(listed, key=listed.get)
        top = [{"token": t, "logprob": lp} for t, lp in listed.items()]
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": token}, "finish_reason": "length",
                             "logprobs": {"content": [{"token": token, "logprob": listed[token],
                                                       "top_logprobs": top}]}}],
                "usage": {"prompt_tokens": self.count(text), "completion_tokens": 1}}
