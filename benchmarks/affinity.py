"""Prefix-cache reuse over two replicas: the same run against two stand-in engines behind one ``base_url: [a, b]``,
with the code before (least busy replica for every request) and this checkout (each query's requests on its home
replica), side by side. By hand, not in CI::

    python benchmarks/affinity.py --dataset beir:CRANFIELD --index INDEX_DIR --before main [--methods rerank,garen]
        [--limit 48] [--max-active-queries 16] [--concurrency 8]

Every role of the method (reranker, navigator) is the openai backend on the same two stand-ins
(``standin_engine.py``); each stand-in keeps a prefix cache as vLLM's automatic prefix caching does and counts the
prompt tokens it found cached there. For each (method, code) it prints the requests each replica took, the prompt
tokens, the cached ones and their share, the span, and whether the rankings (``run.trec``) are the same as the first
side's. The stand-ins' answers depend on the prompt alone, so the rankings must be.

``--workload episodes`` measures what an agent's episodes gain, without a dataset: ``--episodes`` conversations
of ``--turns`` turns each, in flight together, every turn resending the whole conversation so far (the
previous turn's prompt, its answer and a tool result of ``--tool-chars``) through the ``openai`` backend to the
same stand-ins (``--replicas``, 2); once with each episode's turns tied to its home replica
(``replicas.affinity``, as the RARG
agent's loop sends them) and once without (every request to the least busy replica, the code before)::

    python benchmarks/affinity.py --workload episodes [--episodes 16] [--turns 12] [--replicas 2]
        [--cache-tokens 500000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from standin_engine import EngineShape, serve
from throughput import REPO, checkout, garen


def preset(path: Path, urls: list[str], concurrency: int) -> Path:
    model = {"backend": "openai", "base_url": urls, "model": "standin", "api_key_env": "STANDIN_KEY",
             "concurrency": concurrency}
    config = {"extends": "cpu-default",
              "models": {"reranker": {**model, "prompt": "garen-reasoning", "sampling": {"max_tokens": 4096}},
                         "navigator": model}}
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


def on_fleet(shape: EngineShape, replicas: int, work) -> dict:
    """``work(urls)`` against ``replicas`` stand-in engines, then what they counted: requests per replica, prompt
    and cached tokens, the cached share and the longest span."""
    fleet = [serve(shape) for _ in range(replicas)]
    try:
        work([f"http://127.0.0.1:{server.server_port}/v1" for server, _ in fleet])
        stats = [engine.stats() for _, engine in fleet]
    finally:
        for server, engine in fleet:
            server.shutdown()
            engine.close()
    prompt, cached = sum(s["prompt_tokens"] for s in stats), sum(s["cached_tokens"] for s in stats)
    return {"requests": [s["requests"] for s in stats], "prompt": prompt, "cached": cached,
            "share": cached / prompt if prompt else 0.0, "span": max(s["span_s"] for s in stats)}


def measure(code: Path, method: str, opts, out: Path, shape: EngineShape) -> dict:
    def run(urls: list[str]) -> None:
        settings = preset(out.with_name(out.name + ".preset.yaml"), urls, opts.concurrency)  # beside the run folder
        garen(code, ["run", "--dataset", opts.dataset, "--allow-empty-docs", "--preset", str(settings),
                     "--index", opts.index,
                     "--method", method, "--budget", str(opts.budget), "--limit", str(opts.limit), "--no-cache",
                     "--max-active-queries", str(opts.max_active_queries), "--out", str(out)])

    return on_fleet(shape, 2, run)


def episode(backend, number: int, opts, tied: bool) -> None:
    """One conversation of ``opts.turns`` turns, each resending all that came before (an agent's loop)."""
    from garen_infer.llm.backends.replicas import affinity
    from garen_infer.llm.types import SamplingParams

    chat = [{"role": "system", "content": "You search a corpus with shell tools. " * 20},
            {"role": "user", "content": f"Episode {number}: find the documents about topic {number}. " * 10}]
    params = SamplingParams(max_tokens=300)
    with affinity(f"episode-{number}" if tied else None):
        for turn in range(opts.turns):
            [answer] = backend.generate([list(chat)], params)
            chat += [{"role": "assistant", "content": answer.text},
                     {"role": "user",
                      "content": f"[tool result {turn}] " + f"line {number}.{turn} " * (opts.tool_chars // 12)}]


def measure_episodes(opts, shape: EngineShape, tied: bool) -> dict:
    from concurrent.futures import ThreadPoolExecutor

    from garen_infer.llm.backends import make_backend

    def run(urls: list[str]) -> None:
        backend = make_backend({"backend": "openai", "base_url": urls, "model": "standin", "api_key_env": None,
                                "concurrency": opts.concurrency})
        with ThreadPoolExecutor(max_workers=opts.episodes) as pool:
            list(pool.map(lambda k: episode(backend, k, opts, tied), range(opts.episodes)))

    return on_fleet(shape, opts.replicas, run)

def main_episodes(opts, shape: EngineShape) -> int:
    print(f"# {opts.replicas} replicas, each {shape}; {opts.episodes} episodes of {opts.turns} turns in flight, "
          f"{opts.concurrency} requests per replica")
    print(f"{'episodes':18} {'requests a/b':>13} {'prompt tok':>11} {'cached tok':>11} {'cached':>7} {'span s':>7}")
    for label, tied in (("least busy", False), ("home replica", True)):
        s = measure_episodes(opts, shape, tied)
        print(f"{label:18} {'/'.join(map(str, s['requests'])):>13} {s['prompt']:11} {s['cached']:11} "
              f"{s['share']:7.1%} {s['span']:7.1f}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", choices=("run", "episodes"), default="run")
    ap.add_argument("--dataset", help="(run) the dataset")
    ap.add_argument("--index", help="(run) an index of the dataset with the stages of cpu-default")
    ap.add_argument("--before", help="(run) a git revision of this repository: the code before")
    ap.add_argument("--episodes", type=int, default=16, help="(episodes) conversations in flight")
    ap.add_argument("--turns", type=int, default=12, help="(episodes) turns per conversation")
    ap.add_argument("--tool-chars", type=int, default=1200, help="(episodes) characters of each tool result")
    ap.add_argument("--replicas", type=int, default=2, help="(episodes) stand-in replicas behind base_url")
    ap.add_argument("--methods", default="rerank,garen")
    ap.add_argument("--limit", type=int, default=48, help="judged queries per run")
    ap.add_argument("--budget", type=int, default=100)
    ap.add_argument("--max-active-queries", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=8, help="requests in flight per replica")
    ap.add_argument("--capacity", type=float, default=EngineShape.capacity)
    ap.add_argument("--median-answer", type=float, default=100.0)
    ap.add_argument("--cache-tokens", type=int, default=EngineShape.cache_tokens, help="each replica's prefix cache")
    ap.add_argument("--work", default=str(REPO / "runs" / "affinity"))
    opts = ap.parse_args(argv)
    shape = EngineShape(opts.capacity, median_answer=opts.median_answer, cache_tokens=opts.cache_tokens)
    if opts.workload == "episodes":
        return main_episodes(opts, shape)
    if not (opts.dataset and opts.index and opts.before):
        ap.error("--workload run needs --dataset, --index and --before")
    work = Path(opts.work)
    sides = [("before", checkout(opts.before, work)), ("after", REPO)]
    print(f"# two replicas, each {shape}; {opts.limit} queries, budget {opts.budget}, {opts.max_active_queries} "
          f"queries in flight, {opts.concurrency} requests per replica")
    print(f"{'method':8} {'code':7} {'requests a/b':>13} {'prompt tok':>11} {'cached tok':>11} {'cached':>7} "
          f"{'span s':>7}  same ranking")
    for method in opts.methods.split(","):
        runs = {}
        for side, code in sides:
            out = work / f"{side}-{method}"
            shutil.rmtree(out, ignore_errors=True)
            out.parent.mkdir(parents=True, exist_ok=True)
            s = measure(code, method, opts, out, shape)
            runs[side] = out
            same = (
                ""
                if side == "before"
                else "yes"
                if (runs["before"] / "run.trec").read_bytes() == (out / "run.trec").read_bytes()
                else "NO"
            )
            print(f"{method:8} {side:7} {'/'.join(map(str, s['requests'])):>13} {s['prompt']:11} {s['cached']:11} "
                  f"{s['share']:7.1%} {s['span']:7.1f}  {same}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
