"""Our scheduler driving vLLM's asynchronous engine against vLLM's own offline throughput: the same model,
the same prompts (the groups stage's summary prompts over a corpus's documents), the same greedy sampling,
tokens per second side by side in one run. By hand, in the vLLM environment (scripts/vllm_cpu/setup.sh)::

    .venv-vllm/bin/python benchmarks/vllm_throughput.py --dataset beir:CRANFIELD_DIR \
        [--model ~/.cache/garen/gemma3-270m-hf] [--prompts 32] [--docs-per-prompt 1] [--max-tokens 64]

- **vllm**: ``vllm.LLM.generate`` given every prompt in one call (our backend's ``engine: offline``), vLLM's
  own offline throughput: the engine sees the whole batch at once and schedules it as it likes.
- **scheduler**: one query per prompt through ``garen_infer.running.scheduler.Scheduler``, every query in flight,
  with the generator role on ``engine: async`` (``AsyncLLM``): each request goes to the running engine from
  its own lane, as a run's requests do.

Each side runs in a process of its own (an engine's memory goes back when it ends), starts its engine, warms
it up on a prompt of its own, and is timed from the first request to the last answer. Tokens are the prompts'
and the answers' (greedy answers may stop at different lengths if the engines' numerics differ; the table
says how many answers are equal). The engine is the engine tests' CPU setting (fp32, eager, 2,048-token
context). The load average at each side's start and end says what else ran on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GEMMA = Path.home() / ".cache" / "garen" / "gemma3-270m-hf"
CHAT_TEMPLATE = REPO / "scripts" / "vllm_cpu" / "chat_template.jinja"  # the converted Gemma has no template
ENGINE = {"dtype": "float32", "enforce_eager": True, "max_model_len": 2048,
          "engine_args": {"distributed_executor_backend": "uni"}}


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


def backend(model: str, engine: str, slots: int):
    from garen_infer.llm.backends.vllm_backend import VllmBackend

    return VllmBackend(model, chat_template=str(CHAT_TEMPLATE), engine=engine, max_num_seqs=slots, **ENGINE)


def run_vllm(model: str, chats: list, params) -> tuple[float, list]:
    engine = backend(model, "offline", len(chats))
    engine.generate([[{"role": "user", "content": "Warm up."}]], params)
    begun = time.perf_counter()
    answers = engine.generate(chats, params)  # one LLM.generate call with every prompt
    seconds = time.perf_counter() - begun
    engine.close()
    return seconds, answers


def run_scheduler(model: str, chats: list, params) -> tuple[float, list]:
    from garen_infer.data.dataset import Query
    from garen_infer.llm.backends import CachedBackend
    from garen_infer.llm.cache import NoCache
    from garen_infer.llm.requests import Generate
    from garen_infer.llm.roles import LLMGenerator, Roles
    from garen_infer.methods.base import QueryState
    from garen_infer.running.scheduler import Scheduler

    engine = backend(model, "async", len(chats))
    engine.generate([[{"role": "user", "content": "Warm up."}]], params)
    roles = Roles(generator=LLMGenerator(CachedBackend(engine, NoCache()), params))
    states = [QueryState(Query(f"q{i}", ""), [], None) for i in range(len(chats))]

    def summarise(state: QueryState):
        (state.trace["text"],) = yield Generate((chats[int(state.query.id[1:])],))
        return []

    begun = time.perf_counter()
    finished = list(Scheduler(roles, max_active=len(chats)).run(states, summarise))
    seconds = time.perf_counter() - begun
    answers = {f.state.query.id: f for f in finished}
    engine.close()
    return seconds, [_as_completion(answers[s.query.id]) for s in states]


def _as_completion(finished):
    from garen_infer.llm.types import Completion

    cost = finished.ledger.summary()
    return Completion(text=finished.state.trace["text"], input_tokens=cost["input_tokens"],
                      output_tokens=cost["output_tokens"])


def side(opts) -> None:
    """One side, in this process: prints one JSON line."""
    from garen_infer.llm.types import SamplingParams

    chats = summary_prompts(opts.dataset, opts.prompts, opts.docs_per_prompt, opts.max_words)
    params = SamplingParams(max_tokens=opts.max_tokens)
    load = os.getloadavg()[0]
    seconds, answers = (run_vllm if opts.side == "vllm" else run_scheduler)(opts.model, chats, params)
    load = f"{load:.1f}-{os.getloadavg()[0]:.1f}"  # a shared machine: what else ran beside the engine
    print(json.dumps({"side": opts.side, "seconds": seconds, "load": load,
                      "texts": [a.text for a in answers],
                      "input_tokens": sum(a.input_tokens for a in answers),
                      "output_tokens": sum(a.output_tokens for a in answers)}))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--model", default=str(GEMMA))
    # sized for a 2-core CPU (~650-token prompts, ~10 minutes); a GPU takes hundreds
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--docs-per-prompt", type=int, default=1)
    ap.add_argument("--max-words", type=int, default=40, help="words shown of each document")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--side", choices=("vllm", "scheduler"), help=argparse.SUPPRESS)
    opts = ap.parse_args(argv)
    if opts.side:
        side(opts)
        return 0
    # vLLM's own process layout on both sides: the engine core in a process of its own, as AsyncLLM has
    kv_cache_gib = os.environ.get("VLLM_CPU_KVCACHE_SPACE", "3")  # every prompt in the engine at once
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "VLLM_CPU_KVCACHE_SPACE": kv_cache_gib,
           "PYTHONPATH": str(REPO)}
    print(f"# {opts.model}: {opts.prompts} summary prompts of {opts.docs_per_prompt} documents from "
          f"{opts.dataset}, "
          f"greedy, at most {opts.max_tokens} answer tokens; engine {ENGINE}")
    rows = {}
    for name in ("vllm", "scheduler"):
        done = subprocess.run([sys.executable, __file__, *(argv or sys.argv[1:]), "--side", name], env=env,
                              stdout=subprocess.PIPE, text=True)  # vLLM's log goes to stderr as it comes
        if done.returncode:
            raise SystemExit(f"side {name} failed (exit {done.returncode}); its log is above")
        rows[name] = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{'side':10} {'seconds':>8} {'in tokens':>9} {'out tokens':>10} {'out tok/s':>9} "
          f"{'all tok/s':>9} {'load avg':>9}")
    for name, row in rows.items():
        tokens = row["input_tokens"] + row["output_tokens"]
        print(f"{name:10} {row['seconds']:8.1f} {row['input_tokens']:9} {row['output_tokens']:10} "
              f"{row['output_tokens'] / row['seconds']:9.1f} {tokens / row['seconds']:9.1f} "
              f"{row['load']:>9}")
    rate = {name: row["output_tokens"] / row["seconds"] for name, row in rows.items()}
    same = sum(a == b for a, b in zip(rows["vllm"]["texts"], rows["scheduler"]["texts"]))
    print(f"scheduler / vllm, answer tokens per second: {rate['scheduler'] / rate['vllm']:.0%}; "
          f"equal answers: {same} of {opts.prompts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
