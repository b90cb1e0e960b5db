"""Our scheduler driving vLLM's asynchronous engine against vLLM's own offline throughput: the same model, the
same prompts, the same sampling, tokens per second side by side in one run. By hand, in the vLLM environment
(scripts/vllm_cpu/setup.sh)::

    .venv-vllm/bin/python benchmarks/vllm_throughput.py --dataset beir:CRANFIELD_DIR \
        [--model ~/.cache/garen/gemma3-270m-hf] [--prompts 32] [--docs-per-prompt 1] [--max-tokens 64]
    .venv-vllm/bin/python benchmarks/vllm_throughput.py --workload garen --dataset beir:DIR --index INDEX_DIR \
        [--queries 8] [--budget 20] [--window 10] [--keep 5] [--passage-words 60] [--max-tokens 64]
    .venv-vllm/bin/python benchmarks/vllm_throughput.py --workload groups --dataset beir:DIR --index INDEX_DIR \
        [--summary-words 40] [--max-tokens 64]
    .venv-vllm/bin/python benchmarks/vllm_throughput.py --workload windows --dataset beir:CRANFIELD_DIR \
        --max-model-len 10240 [--prompts 8] [--window-docs 40] [--passage-words 300] [--max-tokens 32]

Workloads (``--workload``):

- **summaries**: the groups stage's summary prompt over ``--docs-per-prompt`` consecutive documents, one query
  per prompt through ``garen_infer.running.scheduler.Scheduler``, every query in flight: no dependence at all.
- **garen**: a real GAREN run (``running.runner.execute``) over the first ``--queries`` judged queries, all in
  flight, the listwise reranker and the yes/no navigator on one vLLM engine, as two roles with the same model spec
  share one (``llm.roles.build_roles``). Each query is a chain: a window's ranking and its navigator scores decide
  the next window, so the engine holds only what the unfinished chains ask at that moment.
- **windows**: listwise rerank windows (GAREN's non-reasoning prompt) of ``--window-docs`` consecutive documents
  at ``--passage-words`` each, ~8K tokens with the defaults, one query per window, every query in flight: the
  prefill-heavy request a GPU preset's reranker sees most.
- **groups**: the groups stage's summaries (``index.grouping.groups``: every group's prompt in one stream, each
  with its sampled retries) over the index's own groups, with the vLLM generator.

Sides, each in a process of its own (an engine's memory goes back when it ends), each starting its engine and
warming it up on a prompt of its own, timed from the first request to the last answer:

- **scheduler** (ours, first): the workload on ``engine: async`` (``AsyncLLM``), each request added to the running
  engine from its own lane. Every prompt the engine is sent is recorded with its sampling and its answer, and
  how many requests are in the engine over time (mean and peak).
- **vllm**: ``vllm.LLM.generate`` given the same prompts at once (our backend's ``engine: offline``): for the
  recorded workloads one call per kind of request (texts with their sampling; yes/no scores, one token with both
  labels' logprobs), one after another; vLLM's own offline throughput.

Each side prints the limits its engine started with (``max_num_seqs``, ``max_num_batched_tokens``, KV cache
tokens, ``max_model_len``): ``--max-num-seqs`` and ``--max-num-batched-tokens`` set them on both sides as a
preset does; left out, each engine takes what vLLM's offline context gives it.

Tokens are the prompts' and the answers' as the engine counts them (a yes/no score is one answer token). Greedy
answers may differ where the engines' numerics differ (the summary says how many texts are equal and the largest
P(yes) gap). The engine is the engine tests' CPU setting (fp32, eager, a 2,048-token context unless
``--max-model-len`` says otherwise). The load average at
each side's start and end says what else ran on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GEMMA = Path.home() / ".cache" / "garen" / "gemma3-270m-hf"
CHAT_TEMPLATE = REPO / "scripts" / "vllm_cpu" / "chat_template.jinja"  # the converted Gemma has no template
ENGINE = {"dtype": "float32", "enforce_eager": True, "engine_args": {"distributed_executor_backend": "uni"}}
WARM_UP = [[{"role": "user", "content": "Warm up."}]]


def engine_spec(opts, engine: str) -> dict:
    limits = {"max_num_seqs": opts.max_num_seqs, "max_num_batched_tokens": opts.max_num_batched_tokens}
    return {"backend": "vllm", "model": opts.model, "chat_template": str(CHAT_TEMPLATE), "engine": engine,
            "max_model_len": opts.max_model_len, **{k: v for k, v in limits.items() if v}, **ENGINE}


def backend(opts, engine: str):
    from garen_infer.llm.backends import make_backend

    return make_backend(engine_spec(opts, engine))


class Recorded:
    """A backend that keeps every prompt it is sent, with its sampling and its answer, and the requests in the
    engine over time: the scheduler side's record, which the vllm side replays."""

    def __init__(self, backend):
        self.backend, self.id = backend, backend.id
        self.calls: list[dict] = []
        self._lock = threading.Lock()
        self._in_engine, self._since, self._weighted, self.peak = 0, 0.0, 0.0, 0
        self.first = self.last = 0.0

    @property
    def requests_at_once(self) -> int:
        return self.backend.requests_at_once

    def generate(self, chats, params):
        return self._record(chats, lambda: self.backend.generate(chats, params),
                            {"kind": "generate", "params": vars(params)})

    def score_yes_no(self, chats, assistant_prefix: str):
        return self._record(chats, lambda: self.backend.score_yes_no(chats, assistant_prefix),
                            {"kind": "yes_no", "prefix": assistant_prefix})

    def _record(self, chats, call, how: dict):
        self._count(len(chats))
        try:
            answers = call()
        finally:
            self._count(-len(chats))
        with self._lock:
            self.calls += [{**how, "chat": c, "text": a.text, "score": a.score, "input_tokens": a.input_tokens,
                            "output_tokens": a.output_tokens} for c, a in zip(chats, answers)]
        return answers

    def _count(self, change: int) -> None:
        with self._lock:  # the time-weighted mean of the requests in the engine, from the first to the last
            now = time.perf_counter()
            if not self.first:
                self.first = self._since = now
            self._weighted += self._in_engine * (now - self._since)
            self._in_engine += change
            self._since = self.last = now
            self.peak = max(self.peak, self._in_engine)

    def summary(self) -> dict:
        span = self.last - self.first
        return {"seconds": span, "mean_in_engine": self._weighted / span if span else 0.0, "peak_in_engine": self.peak}

    def close(self) -> None:
        self.backend.close()


# ---- the scheduler side, by workload ---------------------------------------------------------------------------
def summary_prompts(dataset: str, count: int, docs_per_prompt: int, max_words: int) -> list:
    """The groups stage's summarizer prompt over runs of ``docs_per_prompt`` consecutive documents."""
    from garen_infer.data import load_dataset
    from garen_infer.llm.prompts import summarizer

    documents = load_dataset(dataset, allow_empty_docs=True).documents
    texts = [d.full_text for d in documents if d.full_text.strip()]
    if len(texts) < count * docs_per_prompt:
        raise SystemExit(f"{dataset} has {len(texts)} documents with text; {count} prompts need "
                         f"{count * docs_per_prompt}")
    runs = [texts[i * docs_per_prompt:(i + 1) * docs_per_prompt] for i in range(count)]
    return [summarizer(documents, max_words) for documents in runs]


def window_prompts(dataset: str, count: int, docs_per_window: int, passage_words: int) -> list:
    """GAREN's listwise window over ``docs_per_window`` consecutive documents for each of the first ``count``
    judged queries: the reranker's prompt at a GPU preset's length (which documents does not change the cost)."""
    from garen_infer.data import load_dataset
    from garen_infer.llm.prompts import garen_non_reasoning

    data = load_dataset(dataset, allow_empty_docs=True)
    texts = [d.full_text for d in data.documents if d.full_text.strip()]
    queries = data.judged_queries()[:count]
    return [garen_non_reasoning(q.text, texts[k * docs_per_window:(k + 1) * docs_per_window], passage_words)
            for k, q in enumerate(queries)]


def ours_summaries(opts, params) -> tuple[Recorded, dict]:
    chats = summary_prompts(opts.dataset, opts.prompts, opts.docs_per_prompt, opts.max_words)
    return ours_independent(opts, params, chats, "prompt")


def ours_windows(opts, params) -> tuple[Recorded, dict]:
    chats = window_prompts(opts.dataset, opts.prompts, opts.window_docs, opts.passage_words)
    return ours_independent(opts, params, chats, "rerank window")


def ours_independent(opts, params, chats: list, what: str) -> tuple[Recorded, dict]:
    """Each chat a query of one request, every query in flight through the scheduler."""
    from garen_infer.data.dataset import Query
    from garen_infer.llm.backends import CachedBackend
    from garen_infer.llm.cache import NoCache
    from garen_infer.llm.requests import Generate
    from garen_infer.llm.roles import LLMGenerator, Roles
    from garen_infer.methods.base import QueryState
    from garen_infer.running.scheduler import Scheduler

    engine = backend(opts, "async")
    engine.generate(WARM_UP, params)
    recorded = Recorded(engine)
    roles = Roles(generator=LLMGenerator(CachedBackend(recorded, NoCache()), params))
    states = [QueryState(Query(f"q{i}", ""), [], None) for i in range(len(chats))]

    def summarise(state: QueryState):
        yield Generate((chats[int(state.query.id[1:])],))
        return []

    list(Scheduler(roles, max_active=len(chats)).run(states, summarise))
    return recorded, {"in flight": f"{len(chats)} queries of one {what}", "limits": engine.limits.as_record()}


def ours_garen(opts, params) -> tuple[Recorded, dict]:
    from garen_infer.configuration.presets import load_preset, run_config_from
    from garen_infer.data import load_dataset
    from garen_infer.index.folder import IndexFolder
    from garen_infer.llm.cache import NoCache
    from garen_infer.llm.roles import build_roles
    from garen_infer.running.session import execute

    spec = engine_spec(opts, "async")
    reranker = {**spec, "prompt": "garen", "max_words": opts.passage_words,
                "sampling": {"temperature": 0.0, "max_tokens": opts.max_tokens}}
    preset = load_preset("cpu-default", {"models": {"reranker": reranker, "navigator": spec},
                                         "methods.garen": {"window": opts.window, "keep": opts.keep}})
    config = run_config_from(preset, "garen", opts.budget, opts.queries, opts.queries)  # every query in flight
    dataset = load_dataset(opts.dataset, allow_empty_docs=True)
    index = IndexFolder.open(opts.index, dataset)
    roles = build_roles({r: config.models[r] for r in config.roles}, [d.full_text for d in dataset.documents], index,
                        NoCache(), dataset.name)
    shared = roles.reranker.backend  # the response cache's wrapper of the one engine both roles ask
    if roles.scorers["navigator"].backend is not shared:
        raise SystemExit("the reranker and the navigator did not get one engine")
    shared.backend.generate(WARM_UP, params)
    recorded = shared.backend = Recorded(shared.backend)
    with tempfile.TemporaryDirectory() as out:
        metrics = execute(dataset, index, config, out, roles=roles, log=lambda line: print(line, file=sys.stderr))
    return recorded, {
        "in flight": f"{opts.queries} GAREN queries (chains)",
        "ledger tokens": round((metrics["mean_input_tokens"] + metrics["mean_output_tokens"]) * opts.queries),
        "nDCG@10": metrics.get("nDCG@10"),
        "answer problems": metrics["answer_problems"],
        "truncated prompts": metrics["truncated_prompts"],
    }


def ours_groups(opts, params) -> tuple[Recorded, dict]:
    from garen_infer.data import load_dataset
    from garen_infer.index.folder import IndexFolder
    from garen_infer.index.grouping.groups import GroupParams, _llm_summaries
    from garen_infer.llm.cache import NoCache
    from garen_infer.llm.roles import build_roles

    spec = {**engine_spec(opts, "async"), "sampling": {"temperature": 0.0, "max_tokens": opts.max_tokens}}
    dataset = load_dataset(opts.dataset, allow_empty_docs=True)
    index = IndexFolder.open(opts.index, dataset)
    texts = [d.full_text for d in dataset.documents]
    groups = index.groups("groups").members  # the index's own partition; its summaries are asked anew
    stage = GroupParams(summarizer=spec, summary_max_words=opts.summary_words)
    generator = build_roles({"generator": spec}, texts, index, NoCache()).generator  # as stage_generator builds it
    generator.backend.backend.generate(WARM_UP, params)
    recorded = generator.backend.backend = Recorded(generator.backend.backend)
    answers = dict(_llm_summaries(generator, list(range(len(groups))), groups, texts, stage))
    return recorded, {"in flight": f"{len(groups)} group summaries in one stream",
                      "fallbacks": sum(a is None for a in answers.values()),
                      "truncated prompts": generator.backend.truncated_prompts}


OURS = {"summaries": ours_summaries, "windows": ours_windows, "garen": ours_garen, "groups": ours_groups}


# ---- vLLM's own: the recorded prompts, every one at once --------------------------------------------------------
def run_vllm(opts, calls: list[dict], params) -> tuple[float, list, dict]:
    """One ``LLM.generate`` per kind of request over every recorded prompt of that kind; answers in ``calls``' order."""
    from garen_infer.llm.types import SamplingParams

    engine = backend(opts, "offline")
    engine.generate(WARM_UP, params)
    kinds = defaultdict(list)
    for i, call in enumerate(calls):
        kinds[json.dumps({k: call[k] for k in ("kind", "params", "prefix") if k in call}, sort_keys=True)].append(i)
    answers: list = [None] * len(calls)
    begun = time.perf_counter()
    for key, at in kinds.items():
        how, chats = json.loads(key), [calls[i]["chat"] for i in at]
        out = (engine.generate(chats, SamplingParams(**how["params"])) if how["kind"] == "generate"
               else engine.score_yes_no(chats, how["prefix"]))
        for i, answer in zip(at, out):
            answers[i] = answer
    seconds = time.perf_counter() - begun
    limits = engine.limits.as_record()
    engine.close()
    return seconds, answers, limits


def side(opts) -> None:
    """One side, in this process: writes its row (and, on our side, the prompts) to ``--record``."""
    from garen_infer.llm.types import SamplingParams

    params = SamplingParams(max_tokens=opts.max_tokens)
    record = Path(opts.record)
    load = os.getloadavg()[0]
    if opts.side == "scheduler":
        recorded, facts = OURS[opts.workload](opts, params)
        recorded.close()
        calls, row = recorded.calls, {**recorded.summary(), **facts}
        (record / "prompts.json").write_text(json.dumps(calls))
    else:
        calls = json.loads((record / "prompts.json").read_text())
        seconds, answers, limits = run_vllm(opts, calls, params)
        calls = [{**c, "text": a.text, "score": a.score, "input_tokens": a.input_tokens,
                  "output_tokens": a.output_tokens}
                 for c, a in zip(calls, answers)]
        row = {"seconds": seconds, "limits": limits}
    load_span = f"{load:.1f}-{os.getloadavg()[0]:.1f}"  # a shared machine: what else ran beside the engine
    row.update(load=load_span, requests=len(calls), input_tokens=sum(c["input_tokens"] for c in calls),
               output_tokens=sum(c["output_tokens"] for c in calls),
               answers=[{k: c[k] for k in ("kind", "text", "score")} for c in calls])
    (record / f"{opts.side}.json").write_text(json.dumps(row))


def compare(ours: list[dict], theirs: list[dict]) -> str:
    texts = [(a["text"], b["text"]) for a, b in zip(ours, theirs) if a["kind"] == "generate"]
    gaps = [abs(a["score"] - b["score"]) for a, b in zip(ours, theirs) if a["kind"] == "yes_no"]
    line = f"equal texts: {sum(a == b for a, b in texts)} of {len(texts)}"
    return line + (f"; yes/no scores: {len(gaps)}, max |dP(yes)| {max(gaps):.2g}" if gaps else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", choices=tuple(OURS), default="summaries")
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--index", help="an index folder of the dataset (garen: bm25, knn_graph, groups; groups: groups)")
    ap.add_argument("--model", default=str(GEMMA))
    ap.add_argument("--max-num-seqs", type=int, default=64, help="sequences the engine runs at once, both sides")
    ap.add_argument("--max-num-batched-tokens", type=int, help="prompt tokens a step, both sides (default: vLLM's)")
    ap.add_argument("--max-model-len", type=int, default=2048, help="the engine's context, both sides")
    ap.add_argument("--max-tokens", type=int, default=64, help="answer tokens at most (windows, summaries)")
    # summaries: sized for a 2-core CPU (~650-token prompts, ~10 minutes); a GPU takes hundreds
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--docs-per-prompt", type=int, default=1)
    ap.add_argument("--max-words", type=int, default=40, help="summaries: words shown of each document")
    # garen: small windows, so that a window fits the 2,048-token context and a run takes minutes on a CPU
    ap.add_argument("--queries", type=int, default=8, help="garen: the first N judged queries, all in flight")
    ap.add_argument("--budget", type=int, default=20)
    ap.add_argument("--window", type=int, default=10)
    ap.add_argument("--keep", type=int, default=5)
    ap.add_argument("--passage-words", type=int, default=60, help="garen, windows: words shown of each passage")
    ap.add_argument("--window-docs", type=int, default=40, help="windows: passages in one window")
    ap.add_argument("--summary-words", type=int, default=40, help="groups: words shown of each document of a group")
    ap.add_argument("--side", choices=("vllm", "scheduler"), help=argparse.SUPPRESS)
    ap.add_argument("--record", help=argparse.SUPPRESS)
    opts = ap.parse_args(argv)
    if opts.workload in ("garen", "groups") and not opts.index:
        raise SystemExit(f"--workload {opts.workload} needs --index (an index folder of --dataset)")
    if opts.side:
        side(opts)
        return 0
    kv_cache_gib = os.environ.get("VLLM_CPU_KVCACHE_SPACE", "3")  # every prompt in the engine at once
    # vLLM's own process layout on both sides: the engine core in a process of its own, as AsyncLLM has
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "VLLM_CPU_KVCACHE_SPACE": kv_cache_gib,
           "PYTHONPATH": str(REPO)}
    print(f"# {opts.workload} on {opts.dataset}, {opts.model}, greedy, at most {opts.max_tokens} answer tokens, "
          f"{opts.max_num_seqs} sequences at once; engine {ENGINE}")
    rows = {}
    with tempfile.TemporaryDirectory() as record:
        for name in ("scheduler", "vllm"):  # ours first: it records the prompts vLLM is given
            done = subprocess.run([sys.executable, __file__, *(argv or sys.argv[1:]), "--side", name,
                                   "--record", record],
                                  env=env)  # vLLM's log goes to stderr as it comes
            if done.returncode:
                raise SystemExit(f"side {name} failed (exit {done.returncode}); its log is above")
            rows[name] = json.loads((Path(record) / f"{name}.json").read_text())
    print(f"{'side':10} {'seconds':>8} {'requests':>8} {'in tokens':>9} {'out tokens':>10} {'out tok/s':>9} "
          f"{'all tok/s':>9} {'load avg':>9}")
    for name, row in rows.items():
        tokens = row["input_tokens"] + row["output_tokens"]
        print(f"{name:10} {row['seconds']:8.1f} {row['requests']:8} {row['input_tokens']:9} {row['output_tokens']:10} "
              f"{row['output_tokens'] / row['seconds']:9.1f} {tokens / row['seconds']:9.1f} {row['load']:>9}")
    rate = {n: (r["input_tokens"] + r["output_tokens"]) / r["seconds"] for n, r in rows.items()}
    ours = rows["scheduler"]
    print(f"scheduler / vllm, all tokens per second: {rate['scheduler'] / rate['vllm']:.0%}; "
          f"{compare(ours['answers'], rows['vllm']['answers'])}")
    facts = {k: v for k, v in ours.items() if k not in ("answers", "seconds", "load", "requests", "input_tokens",
                                                         "output_tokens")}
    for name, row in rows.items():
        print(f"{name} engine started with: {json.dumps(row['limits'])}")
    facts.pop("limits", None)
    print("scheduler side: " + "; ".join(f"{k} {round(v, 1) if isinstance(v, float) else v}" for k, v in facts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
