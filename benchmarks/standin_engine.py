"""A stand-in for a continuous-batching GPU engine behind an OpenAI-compatible endpoint (``/v1/chat/completions``,
and ``/v1/completions`` with a prompt list for yes/no prompts), for throughput measurements without a GPU.

Each request costs work in tokens: its prompt tokens (about 4 characters each) divided by ``prefill_ratio`` (a GPU
reads a prompt far faster than it writes an answer) plus its answer tokens, drawn from the prompt's hash, lognormal
(``median_answer``, ``shape``) and capped at the request's ``max_tokens``. The engine does ``capacity`` tokens of
work per second, shared by the requests in flight, and one request alone gets at most ``capacity / saturation``:
a decode step serves many sequences in nearly the time of one, so the engine is only full with ``saturation``
requests or more in flight. It records its work and its busy share (``stats``): the least time the requests need
is their work over the capacity, and the share of the capacity a client used is that bound over the time it took.

Answers are a function of the prompt alone, as a greedy model's are: a listwise window gets a permutation of its
passages in the reasoning prompt's format (``[Document Ranking] [3] > [1] > ...``, which every listwise
parser reads), a yes/no request P(yes) as the logprobs of "yes" and "no", LATTICE's tree prompts the JSON its
top-down builder reads (a document's levels: its 1..L most frequent words; a clustering: the topics grouped by
their first word), any other prompt a JSON summary. ``stats(kind)`` counts one kind of request (``kind_of``).

Given a ``tokenizer`` (the model's, with its chat template), a yes/no chat is read as vLLM reads it: rendered
by the template (``add_generation_prompt``, ``continue_final_message``, ``chat_template_kwargs``) and counted in
the tokenizer's tokens; ``/v1/completions`` then takes ``prompt`` as a text or a list, as vLLM does, each prompt
a sequence of its own in the engine (its work as a chat's), one choice per prompt with its ``index``, logprobs
in that API's form. A chat and the same chat rendered by the client draw the same answer.

The engine keeps a prefix cache as vLLM's automatic prefix caching does (``PrefixCache``): a prompt is read in
blocks (``BLOCK_CHARS``, about 16 tokens), each named by a hash of every block before it and itself, and the
leading blocks an earlier prompt on this engine already holds count as cached, up to ``cache_tokens`` kept (the
least recently read evicted first). Each answer's ``usage.prompt_tokens_details.cached_tokens`` says how many (as
vLLM's does), and ``stats()`` the totals. The count does not change the work: reuse is measured, not rewarded.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from statistics import NormalDist

TICK = 0.002  # seconds per step of the engine's clock
BLOCK_CHARS = 64  # a prefix-cache block: 16 tokens at about 4 characters each (vLLM's default block size)


@dataclass(frozen=True)
class EngineShape:
    capacity: float = 20_000.0  # tokens of work per second
    saturation: int = 16  # requests in flight that fill the engine
    prefill_ratio: float = 20.0  # prompt tokens read in the time of one answer token
    median_answer: float = 300.0  # answer tokens, median of the lognormal
    shape: float = 1.0  # the lognormal's sigma: 0 = every answer the median's length
    cache_tokens: int = 500_000  # prompt tokens the prefix cache holds (a GPU's KV cache beside its running batch)


class PrefixCache:
    """Which leading blocks of a prompt an earlier prompt left in the cache (``read``), in tokens."""

    def __init__(self, cache_tokens: int):
        self.blocks: OrderedDict[bytes, None] = OrderedDict()
        self.most = max(cache_tokens * 4 // BLOCK_CHARS, 1)
        self.prompt_tokens = self.cached_tokens = 0
        self._lock = threading.Lock()

    def read(self, prompt: str, tokens: int) -> int:
        """Cached tokens of ``prompt`` (of ``tokens`` in all), then every full block of it kept as the newest."""
        names, chain = [], hashlib.sha256()
        for start in range(0, len(prompt) - BLOCK_CHARS + 1, BLOCK_CHARS):
            chain.update(prompt[start : start + BLOCK_CHARS].encode())
            names.append(chain.copy().digest())
        with self._lock:
            hits = next((k for k, name in enumerate(names) if name not in self.blocks), len(names))
            for name in names:
                self.blocks[name] = None
                self.blocks.move_to_end(name)
            while len(self.blocks) > self.most:
                self.blocks.popitem(last=False)
            cached = min(round(tokens * hits * BLOCK_CHARS / max(len(prompt), 1)), tokens)
            self.prompt_tokens += tokens
            self.cached_tokens += cached
        return cached


def digest(text: str) -> float:
    """A number in (0, 1) drawn from ``text``."""
    return (int(hashlib.sha256(text.encode()).hexdigest()[:12], 16) + 0.5) / 16**12


def answer_tokens(prompt: str, max_tokens: int, shape: EngineShape) -> int:
    drawn = shape.median_answer * math.exp(shape.shape * NormalDist().inv_cdf(digest("length" + prompt)))
    return max(1, min(int(drawn), max_tokens))


def listwise_passages(prompt: str) -> int:
    """How many passages a listwise prompt numbers: RankGPT's "Rank the N passages", or GAREN's and RGS's
    ``[Documents] [1] ... [2] ...`` (0: not a listwise prompt)."""
    stated = re.search(r"Rank the (\d+) passages", prompt)
    if stated:
        return int(stated.group(1))
    if "[Documents]" not in prompt:
        return 0
    listed, n = prompt.split("[Documents]", 1)[1], 0
    while f"[{n + 1}] " in listed:
        listed = listed.split(f"[{n + 1}] ", 1)[1]
        n += 1
    return n


def kind_of(body: dict, prompt: str) -> str:
    """What a request asks: yes/no, listwise, levels or clustering (LATTICE's top-down tree), or summary."""
    if body.get("logprobs"):
        return "yes/no"
    if listwise_passages(prompt):
        return "listwise"
    if "levels of detail" in prompt and "Document:\n" in prompt:
        return "levels"
    if "topic descriptions" in prompt and _TOPIC.search(prompt):
        return "clustering"
    return "summary"


_TOPIC = re.compile(r"^\[(\d+)\] (.*)$", re.MULTILINE)
_WORD = re.compile(r"[a-z]{4,}")
_COMMON = set("with that from this which have been were these there their they than also into when where such only "
              "used some more other both upon will each then what given shown paper results".split())


def tree_levels(prompt: str) -> list[str]:
    """A document's levels, broad to specific: its most frequent word, then the two most frequent, and so on."""
    levels = int(re.search(r"at (\d+) levels of detail", prompt).group(1))
    document = prompt.split("Document:\n", 1)[1].split("\n\nReply", 1)[0]
    counts: dict[str, int] = {}
    for word in _WORD.findall(document.lower()):
        if word not in _COMMON:
            counts[word] = counts.get(word, 0) + 1
    words = sorted(counts, key=lambda w: (-counts[w], w))[:levels] or ["document"]
    words += [words[-1]] * (levels - len(words))
    return [" ".join(words[: k + 1]) for k in range(levels)]


def tree_clusters(prompt: str) -> list[dict]:
    """The numbered topics grouped by their first word, the smallest groups merged down to the most allowed (a
    single group split in two)."""
    topics = _TOPIC.findall(prompt)
    most = int(re.search(r"between \d+ and (\d+) clusters", prompt).group(1))
    by_word: dict[str, list[int]] = {}
    for number, topic in topics:
        by_word.setdefault((topic.split() or [""])[0], []).append(int(number))
    groups = sorted(by_word.values(), key=lambda g: (len(g), g[0]))
    while len(groups) > most:
        groups = sorted([groups[0] + groups[1]] + groups[2:], key=lambda g: (len(g), g[0]))
    if len(groups) == 1:
        half = len(groups[0]) // 2
        groups = [groups[0][:half], groups[0][half:]]
    words = {int(number): topic for number, topic in topics}
    return [{"name": words[g[0]].split()[0] if words[g[0]].split() else "topic",
             "description": f"topics like {words[g[0]]}",
             "members": sorted(g)} for g in groups]


def yes_no_logprobs(prompt: str) -> dict[str, float]:
    """log P of "yes" and "no" a model would give after this prompt."""
    p = min(max(digest("yes" + prompt), 1e-6), 1 - 1e-6)
    return {"yes": math.log(p), "no": math.log(1 - p)}


def answer(body: dict, prompt: str) -> dict:
    """The message (and logprobs) a greedy model would give to this prompt."""
    kind = kind_of(body, prompt)
    if kind == "yes/no":
        top = [{"token": token, "logprob": lp} for token, lp in yes_no_logprobs(prompt).items()]
        return {"message": {"role": "assistant", "content": "yes"},
                "logprobs": {"content": [{**top[0], "top_logprobs": top}]}}
    if kind == "listwise":
        n = listwise_passages(prompt)
        order = sorted(range(1, n + 1), key=lambda i: digest(f"{i}:{prompt}"))
        ranking = " > ".join(f"[{i}]" for i in order)
        content = f"[Reasoning Trace] Step 1: compare. [Document Ranking] {ranking}"
        return {"message": {"role": "assistant", "content": content}}
    if kind == "levels":
        return {"message": {"role": "assistant", "content": json.dumps({"levels": tree_levels(prompt)})}}
    if kind == "clustering":
        return {"message": {"role": "assistant", "content": json.dumps({"clusters": tree_clusters(prompt)})}}
    return {"message": {"role": "assistant",
                        "content": json.dumps({"concept": "topic", "summary": f"documents {digest(prompt):.6f}"})}}


class Engine:
    """The shared capacity: a clock that advances every request in flight by its share of the work."""

    def __init__(self, shape: EngineShape):
        self.shape = shape
        self._flight: dict[int, list] = {}  # id -> [work left, done event]
        self._lock = threading.Lock()
        self._next = 0
        self.requests = self.work = self.longest = 0  # requests: sequences (a prompt list's prompts each count)
        self.calls = 0  # HTTP requests
        self.first = self.last = None
        self.full_s = 0.0  # time with ``saturation`` requests or more in flight
        # (kind, work, start, full_s then, end, full_s then, call, prompt) per answered sequence
        self._done: list[tuple] = []
        self._stop = threading.Event()
        self.prefixes = PrefixCache(shape.cache_tokens)
        threading.Thread(target=self._run, daemon=True).start()

    def serve(self, work: float, kind: str = "", prompt: str = "") -> None:
        """Block until ``work`` tokens of this request are done."""
        self.serve_many([work], kind, [prompt])

    def serve_many(self, works: list[float], kind: str = "", prompts: list[str] | None = None) -> None:
        """Block until every sequence of one HTTP request (``works`` tokens each, all in flight at once) is done;
        ``prompts`` are kept with them, for ``sequences``."""
        prompts = prompts or [""] * len(works)
        events = []
        with self._lock:
            self.calls += 1
            for work in works:
                done = threading.Event()
                self._next += 1
                self._flight[self._next] = [work, done]
                events.append(done)
                self.requests += 1
                self.work += work
                self.longest = max(self.longest, work)
            self.first = self.first or time.perf_counter()
            call = self.calls
            records = [(kind, work, time.perf_counter(), self.full_s, prompt) for work, prompt in zip(works, prompts)]
        for done in events:
            done.wait()
        with self._lock:
            self.last = time.perf_counter()
            self._done.extend((*record[:4], self.last, self.full_s, call, record[4]) for record in records)

    def _run(self) -> None:
        per_request = self.shape.capacity / self.shape.saturation
        clock = time.perf_counter()
        while not self._stop.is_set():
            time.sleep(TICK)
            now = time.perf_counter()
            step, clock = now - clock, now
            with self._lock:
                if len(self._flight) >= self.shape.saturation:
                    self.full_s += step
                if not self._flight:
                    continue
                rate = min(self.shape.capacity / len(self._flight), per_request)
                for key in list(self._flight):
                    entry = self._flight[key]
                    entry[0] -= rate * step
                    if entry[0] <= 0:
                        entry[1].set()
                        del self._flight[key]

    def sequences(self, kind: str | None = None) -> list[dict]:
        """Every answered sequence (of ``kind``): its kind, work, start and answer time, call and prompt, for the
        dependent chains (``critical_path.py``)."""
        with self._lock:
            done = list(self._done)
        return [{"kind": r[0], "work": r[1], "start": r[2], "end": r[4], "call": r[6], "prompt": r[7]}
                for r in done if kind is None or r[0] == kind]

    def stats(self, kind: str | None = None) -> dict:
        """Counts and times since the first request (``kind``: of the answered requests of that kind alone, from
        the first one's start to the last one's answer). ``bound_s`` is the least time the work needs at full
        capacity; ``longest_s`` the least time of the longest request (alone it gets ``capacity /
        saturation``), below which no client can go however it sends; ``full`` the share of the span the
        engine was full."""
        if kind is not None:
            return self._stats_of([r for r in self._done if r[0] == kind])
        span = (self.last - self.first) if self.first and self.last else 0.0
        prompt, cached = self.prefixes.prompt_tokens, self.prefixes.cached_tokens
        return {**self._summary(self.requests, self.work, self.longest, span, self.full_s, self.calls),
                "prompt_tokens": prompt, "cached_tokens": cached,
                "cached_share": round(cached / prompt, 3) if prompt else 0.0}

    def _stats_of(self, done: list[tuple]) -> dict:
        if not done:
            return self._summary(0, 0.0, 0.0, 0.0, 0.0, 0)
        first, last = min(done, key=lambda r: r[2]), max(done, key=lambda r: r[4])
        return self._summary(len(done), sum(r[1] for r in done), max(r[1] for r in done), last[4] - first[2],
                             last[5] - first[3],
                             len({r[6] for r in done}))

    def _summary(self, requests: int, work: float, longest_work: float, span: float, full_s: float, calls: int) -> dict:
        bound = work / self.shape.capacity
        longest = longest_work * self.shape.saturation / self.shape.capacity
        return {"requests": requests, "work_tokens": round(work), "span_s": round(span, 2),
                "bound_s": round(bound, 2), "longest_s": round(longest, 2),
                "capacity_used": round(bound / span, 3) if span else 0.0,
                "full": round(min(full_s / span, 1.0), 3) if span else 0.0,
                "requests_per_s": round(requests / span, 1) if span else 0.0,
                "calls": calls, "calls_per_s": round(calls / span, 1) if span else 0.0}

    def close(self) -> None:
        self._stop.set()


def completion_choice(index: int, prompt: str) -> dict:
    """A yes/no prompt's choice in the completions API's form: its logprobs a {token: logprob} map per step."""
    listed = yes_no_logprobs(prompt)
    token = max(listed, key=listed.__getitem__)
    return {"index": index, "text": token, "finish_reason": "length",
            "logprobs": {"tokens": [token], "token_logprobs": [listed[token]], "top_logprobs": [listed],
                         "text_offset": [0]}}


class Reader:
    """How the engine reads a prompt: the model's tokenizer and chat template when given (as vLLM reads a chat),
    else the messages' text joined, at about 4 characters a token."""

    def __init__(self, tokenizer=None):
        self.tokenizer = tokenizer
        self._lock = threading.Lock()  # a fast tokenizer is not for two threads at once

    def chat(self, body: dict) -> str:
        if self.tokenizer is None or not body.get("logprobs"):
            return "\n".join(m.get("content") or "" for m in body.get("messages", []))
        return self.tokenizer.apply_chat_template(
            body["messages"], tokenize=False, add_generation_prompt=body.get("add_generation_prompt", True),
            continue_final_message=body.get("continue_final_message", False), **body.get("chat_template_kwargs", {}))

    def tokens(self, prompt: str) -> int:
        return self.tokens_of([prompt])[0]

    def tokens_of(self, prompts: list[str]) -> list[int]:
        """Each prompt's token count; a list is encoded in one call, which the fast tokenizer spreads over its
        threads (one call a prompt, under the lock, made the stand-in's reading the run's bottleneck)."""
        if self.tokenizer is None:
            return [len(prompt) // 4 + 1 for prompt in prompts]
        with self._lock:
            return [len(ids) for ids in self.tokenizer(prompts, add_special_tokens=False).input_ids]


def serve(
    shape: EngineShape, port: int = 0, tokenizer=None, model: str = "standin"
) -> tuple[ThreadingHTTPServer, Engine]:
    """Start the endpoint in a thread; its URL is ``http://127.0.0.1:<server.server_port>/v1``. ``tokenizer``: the
    model's, to read yes/no chats as vLLM does and to answer /v1/completions. ``GET /v1/models`` lists ``model``."""
    engine = Engine(shape)
    reader = Reader(tokenizer)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):  # the http.server name
            found = self.path.rstrip("/").endswith("/models")
            data = json.dumps({"object": "list", "data": [{"id": model, "object": "model"}]} if found else {}).encode()
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):  # the http.server name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path.endswith("/chat/completions"):
                prompt = reader.chat(body)
                prompt_tokens = reader.tokens(prompt)
                out = 1 if body.get("logprobs") else answer_tokens(prompt, int(body.get("max_tokens") or 256), shape)
                cached = engine.prefixes.read(prompt, prompt_tokens)
                engine.serve(prompt_tokens / shape.prefill_ratio + out, kind_of(body, prompt), prompt)
                reply = {"choices": [{"index": 0, "finish_reason": "stop", **answer(body, prompt)}],
                         "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": out,
                                   "prompt_tokens_details": {"cached_tokens": cached}}}
            else:  # /v1/completions: yes/no prompts, each a sequence of the engine's batch, as vLLM schedules them
                prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
                counts = reader.tokens_of(prompts)
                cached = sum(engine.prefixes.read(prompt, count) for prompt, count in zip(prompts, counts))
                engine.serve_many([count / shape.prefill_ratio + 1 for count in counts], "yes/no", prompts)
                reply = {"choices": [completion_choice(i, prompt) for i, prompt in enumerate(prompts)],
                         "usage": {"prompt_tokens": sum(counts), "completion_tokens": len(prompts),
                                   "prompt_tokens_details": {"cached_tokens": cached}}}
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):  # quiet: thousands of requests
            pass

    class Server(ThreadingHTTPServer):
        request_queue_size = 1024  # the listen backlog: at 5 (the default) a burst of connections is reset

    server = Server(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, engine


if __name__ == "__main__":  # a server of its own, as a cluster task starts ``vllm serve``: --port N --model NAME
    import argparse

    ap = argparse.ArgumentParser(description="the stand-in engine as a server process")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--model", default="standin")
    opts = ap.parse_args()
    http_server, _ = serve(EngineShape(), opts.port, model=opts.model)
    print(f"serving {opts.model} at http://127.0.0.1:{http_server.server_port}/v1", flush=True)
    threading.Event().wait()
