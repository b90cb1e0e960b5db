"""Compare garen_infer's Lucene analyzer with Lucene itself on every document and query of a dataset.

    python scripts/lucene_fixture/compare_corpus.py --jar anserini-0.24.0-fatjar.jar
        --dataset beir:../shared/data/scifact:test

Prints how many texts and tokens were compared and every text whose tokens differ (none, at the time of writing,
on SciFact, Cranfield and stdlib-docs).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_fixture import run_lucene

from garen_infer.data import load_dataset
from garen_infer.index.lexical.lucene_analyzer import english_tokens, standard_tokens


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jar", required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--allow-empty-docs", action="store_true")
    args = parser.parse_args(argv)
    dataset = load_dataset(args.dataset, args.allow_empty_docs)
    texts = [d.full_text for d in dataset.documents] + [q.text for q in dataset.queries]
    outputs, version = run_lucene(args.jar, texts)
    differ, tokens = 0, 0
    for text, out in zip(texts, outputs):
        tokens += len(out["english"])
        ours = (standard_tokens(text), english_tokens(text))
        if ours != ([t for t, _ in out["standard"]], out["english"]):
            differ += 1
            print(f"DIFFERS: {text[:80]!r}")
    print(f"{dataset.name}: {len(texts)} texts, {tokens} analyzed tokens from {version}; {differ} texts differ")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
