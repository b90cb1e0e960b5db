"""What real models' answer shapes do to each method: every method run on SciFact's first test queries twice, with
a scripted model that answers every prompt perfectly (plain ranking, plain JSON, native tool calls) and with one
that draws each answer's shape from the whole catalogue (garen_infer/testing/answers.py). The scripted model's
notion of relevance is crude (how many of the query's words a passage holds), so the figures show how far each
method moves when answers turn unusable, not how good a model is. Prints one row per method: nDCG@10 of each run,
the share of unusable answers and what the ledger counted.

    .venv/bin/python benchmarks/answer_shapes.py --data DATA/scifact [--queries 10] [--depth 30] [--budget 20]

It builds a small index (cpu-default's bm25, embeddings, kNN graph, groups, semantic tree, corpus files) of the
corpus restricted to the BM25 top ``depth`` of those queries and their judged documents, in a temporary folder.
"""

from __future__ import annotations

import argparse
import tempfile
from collections import Counter
from pathlib import Path

from garen_infer.configuration.presets import load_preset, run_config_from
from garen_infer.data.beir import load_beir
from garen_infer.data.dataset import Dataset
from garen_infer.index.folder import IndexFolder
from garen_infer.index.stages import IndexConfig
from garen_infer.llm.backends import CachedBackend
from garen_infer.llm.cache import NoCache
from garen_infer.llm.roles import LLMGenerator, LLMListwiseReranker, LLMToolChat, LLMYesNoScorer, Roles
from garen_infer.running.session import execute
from garen_infer.testing.answers import ScriptedModel

METHODS = {"bm25": {}, "rerank": {}, "slidegar": {}, "rgs": {}, "garen": {"navigator": "model"},
           "lattice": {"slate_scorer": "generator"},
           "rarg": {}}
PERFECT = {"ranking": ("plain",), "json": ("plain",), "tools": ("native_call",), "score": ("probability",)}


def small_dataset(folder: Path, queries: int, depth: int) -> Dataset:
    full = load_beir(folder)
    import bm25s

    picked = [q for q in full.queries if q.id in full.qrels][:queries]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize([d.full_text for d in full.documents], show_progress=False), show_progress=False)
    rows, _ = retriever.retrieve(bm25s.tokenize([q.text for q in picked], show_progress=False), k=depth,
                                 show_progress=False)
    keep = sorted(
        {int(r) for row in rows for r in row}
        | {full.doc_index[d] for q in picked for d in full.qrels[q.id] if d in full.doc_index}
    )
    return Dataset(full.name, [full.documents[r] for r in keep], picked, {q.id: full.qrels[q.id] for q in picked})


def roles(model: ScriptedModel, dataset: Dataset) -> Roles:
    backend = CachedBackend(model, NoCache())
    texts = [d.full_text for d in dataset.documents]
    return Roles(reranker=LLMListwiseReranker(backend, texts, "garen"), scorers={"navigator": LLMYesNoScorer(backend)},
                 generator=LLMGenerator(backend), agent=LLMToolChat(backend))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="a BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv)")
    parser.add_argument("--queries", type=int, default=10)
    parser.add_argument("--depth", type=int, default=30)
    parser.add_argument("--budget", type=int, default=20)
    args = parser.parse_args()
    dataset = small_dataset(Path(args.data), args.queries, args.depth)
    preset = load_preset("cpu-default")
    with tempfile.TemporaryDirectory() as tmp:
        stages = {**preset["index"], "corpus_files": {}}
        index = IndexFolder.build(dataset, Path(tmp) / "index", IndexConfig.from_dict(stages), log=lambda *_: None)
        print(f"{len(dataset.queries)} queries, {len(dataset.documents)} documents, budget {args.budget}")
        print(f"{'method':10} {'nDCG@10 perfect':>16} {'nDCG@10 shapes':>15} {'unusable':>9}  counted")
        for name, options in METHODS.items():
            preset["methods"][name] = {**(preset["methods"].get(name) or {}), **options}
            config = run_config_from(preset, name, None if name in ("bm25", "rarg") else args.budget)
            runs = {}
            for label, shapes in (("perfect", PERFECT), ("shapes", {})):
                model = ScriptedModel(shapes)
                runs[label] = execute(dataset, index, config, Path(tmp) / f"{name}-{label}",
                                      roles=roles(model, dataset), log=lambda *_: None)
            shaped = runs["shapes"]
            answers = shaped["mean_requests"] * len(dataset.queries) or 1
            unusable = sum(
                n
                for k, n in shaped["answer_problems"].items()
                if k in ("unreadable", "thought_without_answer", "not_a_number")
            )
            counted = ", ".join(f"{k} {n}" for k, n in Counter(shaped["answer_problems"]).most_common())
            print(f"{name:10} {runs['perfect']['nDCG@10']:16.4f} {shaped['nDCG@10']:15.4f} "
                  f"{unusable / answers:9.1%}  {counted}")


if __name__ == "__main__":
    main()
