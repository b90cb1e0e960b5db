"""Runs that outgrow one machine, measured on this one (by hand; nothing here runs in CI).

1. Replicas: one ``garen-infer run`` (rerank, BM25 first stage, SciFact test queries) whose listwise reranker is an
   OpenAI-compatible server, against 1, 2 and 4 replicas of a local stand-in server that answers every request after
   a fixed latency (default 200 ms), ``concurrency`` 4 per replica: queries per second of the run's query loop, and
   the ratio to one replica.
2. Shards: the same kind of run over all judged test queries, unsharded against one server, then as 3 shards run at
   once, each against a server of its own (as three nodes with one server each), then merged: wall seconds of each
   (process start, data loading and the merge included), and a check that the merged files equal the unsharded ones.

The stand-in server runs in its own process, so its threads do not share the client's interpreter. It ranks the
passages of a prompt in reverse order, so every answer depends on the prompt alone.

    python benchmarks/cluster.py --data ../shared/data/scifact --work runs/cluster-bench
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from loopback_server import serve_chats

REPO = Path(__file__).resolve().parent.parent
PRESET = {  # a BM25-only index: no embedding model to load, so the model server is what a query waits for
    "index": {"bm25": {"variant": "bm25s", "k1": 1.2, "b": 0.75}},
    "first_stage": {"kind": "bm25", "depth": 1000},
    "models": {"reranker": {"backend": "openai", "model": "stand-in", "base_url": "http://127.0.0.1:9/v1",
                            "api_key_env": None,
                            "concurrency": 4, "timeout": 60, "max_retries": 2}},
    "run": {"max_active_queries": 16, "max_batch": 64},
    "methods": {"rerank": {"window": 20, "stride": 10}},
}
TIMED = {"mean_model_seconds", "mean_seconds_in_flight", "wall_seconds_per_query"}


def ranking_reply(body: dict) -> dict:
    """The prompt's passages ranked in reverse order: an answer that depends on the prompt alone."""
    passages = len(set(re.findall(r"\[(\d+)\]", body["messages"][-1]["content"])))
    return {"choices": [{"message": {"role": "assistant",
                                     "content": " > ".join(f"[{k}]" for k in range(passages, 0, -1))}}],
            "usage": {"prompt_tokens": len(body["messages"][-1]["content"]) // 4, "completion_tokens": 4 * passages}}


def serve(latency: float, ports) -> None:
    """A stand-in OpenAI-compatible server: every chat completion answered after ``latency`` seconds."""
    serve_chats(ranking_reply, latency, ports)


def start_servers(count: int, latency: float) -> tuple[list, list[str]]:
    ports = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=serve, args=(latency, ports), daemon=True) for _ in range(count)]
    for proc in procs:
        proc.start()
    return procs, [f"http://127.0.0.1:{ports.get(timeout=30)}/v1" for _ in procs]


def stop(procs) -> None:
    for proc in procs:
        proc.terminate()
        proc.join()


def garen(*args) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen([sys.executable, "-m", "garen_infer", *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen) -> None:
    _, err = proc.communicate()
    if proc.returncode:
        sys.exit(f"{' '.join(proc.args)} failed:\n{err[-2000:]}")


def run_args(a, out: Path, urls: list[str], budget: int, *extra) -> list[str]:
    return ["run", "--dataset", f"beir:{a.data}", "--index", str(a.work / "index"), "--preset",
            str(a.work / "preset.yaml"),
            "--method", "rerank", "--budget", str(budget), "--no-cache", "--out", str(out),
            "--set", f"models.reranker.base_url={json.dumps(urls)}", *extra]


def untimed(folder: Path) -> tuple:
    trace = []
    for line in (folder / "trace.jsonl").read_text().splitlines():
        record = json.loads(line)
        record.pop("seconds")
        record["ledger"] = {k: v for k, v in record["ledger"].items() if k not in ("model_seconds", "roles")}
        trace.append(record)
    metrics = {k: v for k, v in json.loads((folder / "metrics.json").read_text()).items() if k not in TIMED}
    return (folder / "run.trec").read_bytes(), trace, metrics


def replicas_benchmark(a) -> list[dict]:
    rows = []
    for count in (1, 2, 4):
        procs, urls = start_servers(count, a.latency)
        out = a.work / f"replicas-{count}"
        start = time.perf_counter()
        finish(garen(*run_args(a, out, urls, a.budget, "--limit", str(a.queries))))
        wall = time.perf_counter() - start
        stop(procs)
        metrics = json.loads((out / "metrics.json").read_text())
        rows.append({"replicas": count, "queries": a.queries, "requests_per_query": metrics["mean_requests"],
                     "queries_per_second": round(1 / metrics["wall_seconds_per_query"], 3),
                     "process_wall_seconds": round(wall, 2)})
        print(f"[replicas] {count}: {rows[-1]}", flush=True)
    for row in rows:
        row["ratio_to_one"] = round(row["queries_per_second"] / rows[0]["queries_per_second"], 2)
    return rows


def shards_benchmark(a) -> dict:
    procs, urls = start_servers(4, a.latency)
    start = time.perf_counter()
    finish(garen(*run_args(a, a.work / "whole", urls[:1], a.shard_budget)))
    whole = time.perf_counter() - start

    start = time.perf_counter()
    jobs = [
        garen(*run_args(a, a.work / f"shard-{i}", [urls[i]], a.shard_budget, "--shard", f"{i}/3"))
        for i in (1, 2, 3)
    ]
    for job in jobs:
        finish(job)
    shards = time.perf_counter() - start
    start = time.perf_counter()
    finish(garen("merge", *(str(a.work / f"shard-{i}") for i in (1, 2, 3)), "--out", str(a.work / "merged"),
                 "--dataset", f"beir:{a.data}"))
    merge = time.perf_counter() - start
    stop(procs)
    queries = len((a.work / "whole" / "trace.jsonl").read_text().splitlines())
    result = {"queries": queries, "budget": a.shard_budget, "unsharded_wall_seconds": round(whole, 2),
              "three_shards_wall_seconds": round(shards, 2), "merge_wall_seconds": round(merge, 2),
              "speedup": round(whole / (shards + merge), 2),
              "merged_equals_unsharded": untimed(a.work / "merged") == untimed(a.work / "whole")}
    print(f"[shards] {result}", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data" / "scifact",
                        help="a BEIR folder (SciFact)")
    parser.add_argument("--work", type=Path, required=True, help="a scratch folder for the index and the runs")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the stand-in server takes per request")
    parser.add_argument("--queries", type=int, default=100, help="queries of the replica runs (the first N judged)")
    parser.add_argument("--budget", type=int, default=100,
                        help="Reranker@k of the replica runs (9 windows of 20 at 100)")
    parser.add_argument("--shard-budget", type=int, default=40,
                        help="Reranker@k of the sharded runs (3 windows of 20 at 40)")
    a = parser.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    import yaml

    (a.work / "preset.yaml").write_text(yaml.safe_dump(PRESET))
    if not (a.work / "index" / "manifest.json").is_file():
        finish(garen("index", "--dataset", f"beir:{a.data}", "--preset", str(a.work / "preset.yaml"), "--out",
                     str(a.work / "index")))
    report = {"latency_seconds": a.latency, "concurrency_per_replica": 4, "replicas": replicas_benchmark(a),
              "shards": shards_benchmark(a)}
    (a.work / "cluster-benchmark.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
