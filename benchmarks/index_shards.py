"""The group summaries of an index built in shards, measured on this machine (by hand; not run in CI).

The summarizer is an OpenAI-compatible stand-in server in its own process that answers every chat after a
fixed latency (default 200 ms) with a JSON summary drawn from the prompt alone. Steps, each a ``garen-infer``
process:

1. ``index --shard-prefix``: BM25, the embeddings and the k-NN graph (cpu-default's), built once;
2. unsharded: ``index`` on a copy of that prefix, against one server;
3. sharded: ``index --shard I/N`` for I = 1..N started at once on another copy, each against a server of
   its own (as N nodes with one endpoint each), then ``index --merge-shards``.

Reports the wall seconds of 2 and 3 (process start, data loading and the merge included), the requests each
made, and whether the merged ``groups/`` equals the unsharded one byte for byte once the ``summarizer`` field
(the backend's id, which names each shard's own base_url) is set aside.

    python benchmarks/index_shards.py --data ../shared/data/scifact --work runs/index-shards
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml
from loopback_server import serve_chats

REPO = Path(__file__).resolve().parent.parent


def summary_reply(body: dict) -> dict:
    """A JSON summary drawn from the chat alone: the same prompt gets the same summary from every server."""
    tag = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest()[:8]
    content = json.dumps({"concept": f"topic {tag}", "summary": f"Documents about {tag}."})
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 20}}


def serve(latency: float, ports, counts) -> None:
    """A stand-in summarizer: each chat answered after ``latency`` seconds with a summary drawn from it."""
    serve_chats(summary_reply, latency, ports, counts)


def garen(*args, cache: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "GAREN_CACHE_DIR": str(cache)}
    return subprocess.Popen([sys.executable, "-m", "garen_infer", *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen) -> None:
    _, err = proc.communicate()
    if proc.returncode:
        sys.exit(f"{' '.join(proc.args)} failed:\n{err[-2000:]}")


def write_preset(path: Path, concurrency: int) -> None:
    from garen_infer.configuration.presets import load_preset

    stages = load_preset("cpu-default")["index"]
    summarizer = {"backend": "openai", "model": "stand-in", "base_url": "http://127.0.0.1:9/v1",
                  "api_key_env": None, "concurrency": concurrency, "sampling": {"max_tokens": 256}}
    index = {name: stages[name] for name in ("bm25", "embeddings", "knn_graph")}
    index["groups"] = {**stages["groups"], "summarizer": summarizer}
    path.write_text(yaml.safe_dump({"index": index}))


def groups_without_names(folder: Path) -> dict[str, bytes]:
    files = {p.name: p.read_bytes() for p in sorted((folder / "groups").iterdir())}
    records = [json.loads(line) for line in files["groups.jsonl"].decode().splitlines()]
    unnamed = [{k: v for k, v in r.items() if k != "summarizer"} for r in records]
    files["groups.jsonl"] = json.dumps(unnamed).encode()
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a BEIR folder")
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight per process")
    a = parser.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    preset = a.work / "preset.yaml"
    write_preset(preset, a.concurrency)
    common = ["index", "--dataset", f"beir:{a.data}", "--preset", str(preset), "--allow-empty-docs"]
    prefix = a.work / "prefix"
    start = time.perf_counter()
    finish(garen(*common, "--out", str(prefix), "--shard-prefix", cache=a.work / "cache-prefix"))
    print(f"[prefix] {time.perf_counter() - start:.1f} s", flush=True)

    ports, counts = multiprocessing.Queue(), multiprocessing.Value("i", 0)
    procs = [multiprocessing.Process(target=serve, args=(a.latency, ports, counts), daemon=True)
             for _ in range(a.shards)]
    for proc in procs:
        proc.start()
    urls = [f"http://127.0.0.1:{ports.get(timeout=30)}/v1" for _ in procs]

    def url(i: int) -> list[str]:
        return ["--set", f"index.groups.summarizer.base_url={urls[i]}"]

    for name in ("whole", "sharded"):
        shutil.rmtree(a.work / name, ignore_errors=True)
        shutil.copytree(prefix, a.work / name)
    start = time.perf_counter()
    finish(garen(*common, "--out", str(a.work / "whole"), *url(0), cache=a.work / "cache-whole"))
    whole, asked_whole = time.perf_counter() - start, counts.value

    start = time.perf_counter()
    jobs = [garen(*common, "--out", str(a.work / "sharded"), "--shard", f"{i + 1}/{a.shards}", *url(i),
                  cache=a.work / f"cache-{i + 1}") for i in range(a.shards)]
    for job in jobs:
        finish(job)
    shards = time.perf_counter() - start
    start = time.perf_counter()
    finish(garen(*common, "--out", str(a.work / "sharded"), "--merge-shards", *url(0),
                 cache=a.work / "cache-merge"))
    merge = time.perf_counter() - start
    for proc in procs:
        proc.terminate()
    info = json.loads((a.work / "whole" / "manifest.json").read_text())["stages"]["groups"]["info"]
    same = groups_without_names(a.work / "whole") == groups_without_names(a.work / "sharded")
    result = {"groups": info["groups"], "shards": a.shards, "latency_s": a.latency,
              "concurrency": a.concurrency, "unsharded_s": round(whole, 1),
              "shards_at_once_s": round(shards, 1), "merge_s": round(merge, 1),
              "speedup_merge_included": round(whole / (shards + merge), 2),
              "requests_unsharded": asked_whole, "requests_sharded": counts.value - asked_whole,
              "same_files_but_summarizer_name": same}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
