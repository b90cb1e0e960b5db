"""Where each run's top 10 comes from: a first-stage run's top N (what retrieve-and-rerank at budget N sees) or
documents the method found beyond it, and how many of each are relevant. This tells whether navigation's finds
reach the top, and whether they are relevant there or only hard negatives for the reranker.

    python benchmarks/top10_sources.py --dataset beir:../shared/data/scifact:test \
        --first-stage runs/bench/cpu-default/scifact/bm25/run.trec RUN_DIR [RUN_DIR ...]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from garen_infer.data.spec import load_dataset
from garen_infer.storage.trec import read_run


def ranked(run: dict[str, dict[str, float]]) -> dict[str, list[str]]:
    """Documents of each query best first (a TREC file's rank column may be absent or tied; the score decides)."""
    return {qid: sorted(scores, key=lambda d: -scores[d]) for qid, scores in run.items()}


def top10_sources(run: dict[str, list[str]], first_stage: dict[str, list[str]],
                  qrels: dict[str, dict[str, int]], depth: int) -> dict:
    rows = {"inside": 0, "inside_relevant": 0, "beyond": 0, "beyond_relevant": 0, "found_beyond": 0,
            "found_beyond_relevant": 0}
    for qid, documents in run.items():
        shallow, gold = (
            set(first_stage.get(qid, [])[:depth]),
            {d for d, grade in qrels.get(qid, {}).items() if grade > 0},
        )
        for rank, doc in enumerate(documents):
            where = "inside" if doc in shallow else "beyond"
            if rank < 10:
                rows[where] += 1
                rows[f"{where}_relevant"] += doc in gold
            if where == "beyond":
                rows["found_beyond"] += 1
                rows["found_beyond_relevant"] += doc in gold
    return {"queries": len(run), **rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True, help="the dataset spec the runs answered (for its judgments)")
    parser.add_argument("--first-stage", required=True, type=Path, help="the first stage's run.trec")
    parser.add_argument("--depth", type=int, default=100, help="the first stage's depth that retrieve-and-rerank sees")
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (with run.trec) or run files")
    args = parser.parse_args()
    qrels, first_stage = load_dataset(args.dataset).qrels, ranked(read_run(args.first_stage))
    print(f"| run | top 10 from first-stage top {args.depth} /q (relevant) | top 10 from beyond /q (relevant) "
          f"| observed beyond /q (relevant) |\n|---|---:|---:|---:|")
    for path in args.runs:
        run = ranked(read_run(path / "run.trec" if path.is_dir() else path))
        r = top10_sources(run, first_stage, qrels, args.depth)
        n = max(r["queries"], 1)
        print(f"| {path} | {r['inside'] / n:.2f} ({r['inside_relevant']}) | {r['beyond'] / n:.2f} "
              f"({r['beyond_relevant']}) | {r['found_beyond'] / n:.1f} ({r['found_beyond_relevant']}) |")


if __name__ == "__main__":
    main()
