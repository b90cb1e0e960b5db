"""pt.Experiment over BM25, rerank, SlideGAR and GAREN next to ``garen-infer bench``'s numbers for the same cells.

Runs ``garen-infer bench`` (methods bm25, rerank, slidegar, garen at one budget, the first N judged queries) and
``pt.Experiment`` over the PyTerrier transformers of the same methods on the same N topics, and prints both as one
Markdown table with the difference. The index folder must hold the stages the methods read (bm25, embeddings,
knn_graph, groups): ``garen-infer index`` with the preset builds them.

    .venv/bin/python benchmarks/pyterrier_experiment.py [--dataset beir:../shared/data/scifact:test]
        [--index indexes/scifact] [--queries 100] [--budget 100] [--out runs/pyterrier-experiment]
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import yaml

os.environ.setdefault("HF_HUB_OFFLINE", "1")
METHODS = ("bm25", "rerank", "slidegar", "garen")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="beir:../shared/data/scifact:test")
    ap.add_argument("--index", default="indexes/scifact")
    ap.add_argument("--preset", default="cpu-default")
    ap.add_argument("--queries", type=int, default=100, help="the first N judged queries")
    ap.add_argument("--budget", type=int, default=100)
    ap.add_argument("--out", default="runs/pyterrier-experiment")
    ap.add_argument("--allow-empty-docs", action="store_true", help="Cranfield")
    args = ap.parse_args(argv)

    import pyterrier as pt
    from pyterrier.measures import R, nDCG

    import garen_infer as gi
    from garen_infer.doors.cli import main as garen_infer
    from garen_infer.doors.pyterrier import BM25, GAREN, Rerank, SlideGAR

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    bench_file = out / "bench.yaml"
    bench_file.write_text(yaml.safe_dump({
        "preset": args.preset, "budgets": [args.budget], "methods": list(METHODS), "baseline": "rerank",
        "build_index": False,
        "datasets": {"data": {"spec": args.dataset, "index": args.index, "allow_empty_docs": args.allow_empty_docs}},
        "runs": str(out / "bench-runs"), "report": str(out / "bench-report"),
    }))
    assert garen_infer(["bench", "--config", str(bench_file), "--limit", str(args.queries), "--no-cache"]) == 0

    index = gi.Index.open(args.index, dataset=args.dataset, allow_empty_docs=args.allow_empty_docs)
    topics = index.topics().head(args.queries)
    options = {"budget": args.budget, "preset": args.preset, "cache": False}
    bm25 = BM25(index, preset=args.preset)
    systems = [bm25, bm25 >> Rerank(index, **options), bm25 >> SlideGAR(index, **options),
               bm25 >> GAREN(index, **options)]
    table = pt.Experiment(
        systems, topics, index.qrels(), eval_metrics=[nDCG @ 10, R @ 100], names=list(METHODS)
    ).set_index("name")

    print(f"\n{args.dataset}, first {len(topics)} judged queries, budget {args.budget}, preset {args.preset}\n")
    print("| method | pt.Experiment nDCG@10 | bench nDCG@10 | pt.Experiment R@100 | bench R@100 | largest difference |")
    print("|---|---:|---:|---:|---:|---:|")
    for method in METHODS:
        cell = f"{method}@{args.budget}" if method != "bm25" else method
        metrics = json.loads((out / "bench-runs" / "data" / f"{cell}.first{args.queries}" / "metrics.json").read_text())
        pairs = [(table.loc[method, "nDCG@10"], metrics["nDCG@10"]), (table.loc[method, "R@100"], metrics["R@100"])]
        diff = max(abs(a - b) for a, b in pairs)
        print(f"| {method} | {pairs[0][0]:.4f} | {pairs[0][1]:.4f} | {pairs[1][0]:.4f} | {pairs[1][1]:.4f} | "
              f"{diff:.1e} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
