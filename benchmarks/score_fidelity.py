"""How much of run.trec's score column is each document's own score, per method?

    .venv/bin/python benchmarks/score_fidelity.py --dataset beir:DIR --index INDEX [--methods bm25 rerank ...]
        [--budget 100] [--limit 50] [--preset cpu-default] [--allow-empty-docs]

Runs each method (no response cache) into a temporary folder and compares its run.trec with the own scores its
trace.jsonl keeps: the share of lines that carry their own score at float32 (the rest were lowered to keep the
ranking's order: a tie, or an order the score does not follow), and the median and largest amount lowered.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
METHODS = ("bm25", "rerank", "slidegar", "garen", "rgs", "lattice")


def fidelity(out: Path) -> tuple[int, int, list[float]]:
    """(lines, lines with their own score, how much each other line with an own score was lowered)."""
    import numpy as np

    from garen_infer.storage.trec import read_run

    run = read_run(out / "run.trec")
    lines = kept = 0
    gaps = []
    for record in map(json.loads, (out / "trace.jsonl").read_text().splitlines()):
        own = dict(zip(record["ranking"], record.get("scores") or [None] * len(record["ranking"])))
        for doc, score in run.get(record["qid"], {}).items():
            lines += 1
            if own.get(doc) is None:
                continue
            if np.float32(score) == np.float32(own[doc]):
                kept += 1
            else:
                gaps.append(own[doc] - score)
    return lines, kept, gaps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--index", required=True)
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--preset", default="cpu-default")
    parser.add_argument("--allow-empty-docs", action="store_true")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from garen_infer.configuration.presets import load_preset, run_config_from
    from garen_infer.data import load_dataset
    from garen_infer.index.folder import IndexFolder
    from garen_infer.llm.cache import NoCache
    from garen_infer.running.session import Session

    dataset = load_dataset(args.dataset, args.allow_empty_docs)
    index = IndexFolder.open(args.index, dataset)
    print(f"{'method':<10} {'scores':<9} {'lines':>7} {'own kept':>9} {'share':>6} {'median lowered':>15} "
          f"{'max lowered':>12}")
    with tempfile.TemporaryDirectory(prefix="score-fidelity-") as tmp:
        for method in args.methods:
            config = run_config_from(load_preset(args.preset), method, args.budget)
            session = Session(dataset, index, config, NoCache(), log=lambda *_: None).limited(args.limit)
            metrics = session.run(Path(tmp) / method)
            lines, kept, gaps = fidelity(Path(tmp) / method)
            median = statistics.median(gaps) if gaps else 0.0
            print(f"{method:<10} {metrics['scores']:<9} {lines:>7} {kept:>9} {kept / max(lines, 1):>6.0%} "
                  f"{median:>15.4f} {max(gaps, default=0.0):>12.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
