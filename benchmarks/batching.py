"""Batching across queries: the same run with one query in flight and with several, on a real LLM on CPU.

The runner keeps up to ``max_active_queries`` per-query searches in flight, and a local engine answers whatever
of their requests is pending in one call (scheduler.py). This runs a method twice on the first N judged SciFact
queries with the transformers backend (Gemma 3 270M, greedy) as the reranker and, for GAREN, the navigator:
with ``max_active_queries=1`` and batched; both without the response cache, so the model really runs. It
prints queries/second for each, the speed-up, and whether the two run.trec files are byte-identical.

    .venv/bin/python benchmarks/batching.py [--queries 8] [--batched 8] [--method garen]

The model loads once and serves both runs. Passages are cut to ``--max-words`` words and the budget is small
(default 40: 3 listwise windows for GAREN) so both runs fit in a few minutes on 2 cores. fp32 (the
transformers backend's CPU default): left padding in a batch changes the arithmetic only through padding
masks, so greedy outputs are expected, not guaranteed, to be identical; the script reports what it finds.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def default_method() -> str:
    import importlib.util

    return "garen" if importlib.util.find_spec("garen_infer.methods.garen") else "slidegar"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default=f"beir:{REPO.parent / 'shared' / 'data' / 'scifact'}")
    ap.add_argument("--index", default="indexes/scifact",
                    help="an index folder with bm25, knn_graph (+ groups for garen)")
    ap.add_argument("--method", default=default_method())
    ap.add_argument("--model", default=str(Path.home() / ".cache" / "garen" / "gemma3-270m-hf"))
    ap.add_argument("--prompt", default="garen", help="listwise prompt: garen | rankgpt")
    ap.add_argument("--max-tokens", type=int, default=60, help="reranker output tokens")
    ap.add_argument("--max-words", type=int, default=40, help="words kept per passage in the listwise prompt")
    ap.add_argument("--budget", type=int, default=40)
    ap.add_argument("--queries", type=int, default=8)
    ap.add_argument("--batched", type=int, default=8, help="max_active_queries of the batched run")
    ap.add_argument("--batch-size", type=int, default=8, help="the transformers backend's forward batch")
    ap.add_argument("--dtype", default="auto", help="auto = float32 on CPU")
    ap.add_argument("--out", default="runs/batching")
    args = ap.parse_args(argv)

    import torch

    from garen_infer.configuration.presets import load_preset, run_config_from
    from garen_infer.data import load_dataset
    from garen_infer.index.folder import IndexFolder
    from garen_infer.llm.cache import NoCache
    from garen_infer.llm.roles import build_roles
    from garen_infer.methods.base import get_method
    from garen_infer.running.session import execute

    dataset = load_dataset(args.dataset)
    index = IndexFolder.open(args.index, dataset)
    method_cls = get_method(args.method)
    llm = {"backend": "transformers", "model": args.model, "device": "cpu", "dtype": args.dtype,
           "batch_size": args.batch_size}
    models = {"reranker": {**llm, "prompt": args.prompt, "max_words": args.max_words,
                           "sampling": {"max_tokens": args.max_tokens}}}
    if "navigator" in method_cls.roles:
        models["navigator"] = dict(llm)
    preset = load_preset("cpu-default")
    preset["models"] = models

    start = time.perf_counter()
    roles = build_roles(models, [d.full_text for d in dataset.documents], index, NoCache())  # one model, both runs
    load_s = time.perf_counter() - start

    results = {}
    for name, active in (("sequential", 1), ("batched", args.batched)):
        out = Path(args.out) / name
        shutil.rmtree(out, ignore_errors=True)
        config = run_config_from(preset, args.method, args.budget, args.queries, active)
        began = time.perf_counter()
        metrics = execute(dataset, index, config, out, roles=roles, cache=NoCache(), log=lambda *_: None)
        wall = time.perf_counter() - began
        results[name] = {"max_active_queries": active, "wall_s": round(wall, 1),
                         "queries_per_s": round(args.queries / wall, 4),
                         "nDCG@10": metrics.get("nDCG@10"), "mean_model_calls": metrics.get("mean_model_calls"),
                         "mean_input_tokens": metrics.get("mean_input_tokens")}
        print(f"[{name}] max_active_queries={active}: {wall:.1f} s, {args.queries / wall:.4f} queries/s", flush=True)

    seq, bat = Path(args.out) / "sequential", Path(args.out) / "batched"
    identical = filecmp.cmp(seq / "run.trec", bat / "run.trec", shallow=False)
    rankings = [
        {
            json.loads(line)["qid"]: json.loads(line)["ranking"]
            for line in (p / "trace.jsonl").read_text().splitlines()
        }
        for p in (seq, bat)
    ]
    same_queries = sum(rankings[0][q] == rankings[1][q] for q in rankings[0])
    report = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads",
        "method": args.method, "model": args.model, "dtype": roles.reranker.backend.backend.dtype,
        "prompt": args.prompt,
        "max_tokens": args.max_tokens, "max_words": args.max_words, "budget": args.budget, "queries": args.queries,
        "model_load_s": round(load_s, 1), **results,
        "speedup": round(results["sequential"]["wall_s"] / results["batched"]["wall_s"], 2),
        "run_trec_identical": identical, "queries_with_identical_ranking": f"{same_queries} of {len(rankings[0])}",
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
