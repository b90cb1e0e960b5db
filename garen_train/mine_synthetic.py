"""``garen-train mine-synthetic``: training pairs for a corpus with no judgments, from queries written from it.

    garen-train mine-synthetic --corpus data/cranfield --index idx/cranfield --out mined/cranfield-synthetic
    garen-train mine-synthetic --corpus data/corpus.jsonl --index idx/mine --out mined/mine-synthetic \\
        --writer generator --set 'models.generator={backend: vllm, model: Qwen/Qwen3-8B}'

Samples ``--queries`` documents stratified over GAREN's groups, writes a query from each (``--writer``: extractive,
deterministic and model-free; or generator, a doc2query prompt to the preset's ``models.generator``, cached and
counted), replays GAREN with those queries exactly as ``garen-train mine`` does (``garen_train/mine.py``), and
labels the groups holding the source document (or a document of the same text) positive and every other group the
navigator scored negative. The folder is ``garen-train mine``'s (``garen_train/mining/folder.py``), marked
``purpose: training``; its manifest's ``inputs`` names the one file read (the corpus, with its digest) and records
``judgments: none read``: the command reads ``corpus.jsonl`` only, never ``queries.jsonl`` or ``qrels/``.
"""

from __future__ import annotations

import argparse
import hashlib
import time
from pathlib import Path

from garen_infer.config import load_preset
from garen_infer.data.beir import read_corpus
from garen_infer.data.dataset import Dataset, Query
from garen_infer.errors import GarenError
from garen_infer.index.folder import IndexFolder
from garen_infer.writer_lock import writer_lock
from garen_train.mine import add_traversal_options, finish, mine_pairs
from garen_train.mining.pairs import NegativeSampling
from garen_train.mining.synthetic import STYLES, ExtractiveWriter, GeneratorWriter, duplicate_rows, sample_documents

WRITE_BATCH = 64  # documents per generator call
NO_JUDGMENTS = "none read: queries are written from the corpus, and each query's positives are its source document and the documents of the same text"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="garen-train mine-synthetic", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", required=True, help="a BEIR folder (only its corpus.jsonl is read) or a corpus.jsonl file (_id, title, text)")
    parser.add_argument("--index", required=True, help="an index folder of that corpus (garen-infer index), with GAREN's stages")
    parser.add_argument("--out", required=True, help="output folder (resumable)")
    parser.add_argument("--queries", type=int, default=500, help="documents to write a query from (default 500)")
    parser.add_argument("--writer", choices=("extractive", "generator"), default="extractive",
                        help="extractive (the document's own words; no model) or generator (doc2query with models.generator)")
    parser.add_argument("--style", choices=STYLES, default="mixed", help="the extractive writer's query form (default mixed: one per document)")
    add_traversal_options(parser)  # --seed among them: it seeds the document sample and the style choice too
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.queries < 1:
        raise GarenError(f"--queries {args.queries}: need at least 1")
    with writer_lock(args.out, "mined folder"):
        return mine_synthetic(args, time.perf_counter())


def corpus_file(given: str) -> Path:
    path = Path(given)
    file = path / "corpus.jsonl" if path.is_dir() else path
    if not file.is_file():
        raise GarenError(f"--corpus {path}: no corpus.jsonl there (give a BEIR folder or a corpus.jsonl file)")
    return file


def mine_synthetic(args: argparse.Namespace, started: float) -> int:
    negatives = NegativeSampling(args.negatives, args.negative_depth, args.negative_skip, args.negative_sampling, args.seed)
    preset = load_preset(args.preset, args.overrides)
    file = corpus_file(args.corpus)
    documents = read_corpus(file, args.allow_empty_docs)
    name = file.parent.name if file.name == "corpus.jsonl" else file.stem
    index = IndexFolder.open(args.index, Dataset(name, documents, []))

    groups = index.groups(preset.get("methods", {}).get("garen", {}).get("groups", "groups"))
    rows = sample_documents(groups.members, documents, args.queries, args.seed)
    writer = make_writer(args, preset, documents)
    start = time.perf_counter()
    texts = [q for i in range(0, len(rows), WRITE_BATCH) for q in writer.write(rows[i : i + WRITE_BATCH])]
    writing_seconds = round(time.perf_counter() - start, 2)
    dataset = synthetic_dataset(name, documents, rows, texts)
    print(f"[mine-synthetic] {len(dataset.queries)} queries written from {len(rows)} documents of {name} "
          f"({writer.name} writer; {sum(writer.counts.unusable.values())} unusable) in {writing_seconds} s")
    if not dataset.queries:
        raise GarenError(f"{args.corpus}: the {writer.name} writer wrote no usable query from {len(rows)} documents")

    args.shard = args.limit = None  # `mine`'s options this command does not take
    pairs = mine_pairs(dataset, index, preset, args, negatives)
    manifest = {
        "purpose": "training",
        "dataset": {"spec": f"synthetic:{file}", "name": dataset.name, "judged_queries": len(dataset.queries), "mined_queries": pairs.queries},
        "inputs": {"corpus": {"path": str(file), "sha256": file_digest(file)}, "judgments": NO_JUDGMENTS},
        "synthetic": {"writer": writer.name, "style": args.style if writer.name == "extractive" else None,
                      "generator": preset["models"].get("generator") if writer.name == "generator" else None,
                      "sampled_documents": len(rows), "seed": args.seed, "counts": writer.counts.as_dict(),
                      "seconds": writing_seconds},
        "guard": {"evaluation_splits": [], "dropped": [], "note": "no query of any split is read"},
        **pairs.manifest(args, index, negatives, started),
    }
    return finish(Path(args.out), pairs, manifest)


def make_writer(args: argparse.Namespace, preset: dict, documents):
    if args.writer == "extractive":
        return ExtractiveWriter(documents, args.style, args.seed)
    spec = preset["models"].get("generator")
    if not spec:
        raise GarenError(f"--writer generator: preset {args.preset} has no models.generator (set one with --set 'models.generator={{...}}')")
    from garen_infer.llm.cache import NoCache, ResponseCache
    from garen_infer.llm.roles import build_roles

    cache = NoCache() if args.no_cache else ResponseCache(args.cache)
    return GeneratorWriter(build_roles({"generator": spec}, [], None, cache).generator, documents)


def synthetic_dataset(name: str, documents, rows: list[int], texts: list[str | None]) -> Dataset:
    """One query per written text, judged relevant to its source document and that document's duplicates."""
    duplicates = duplicate_rows(documents)
    queries, qrels = [], {}
    for row, text in zip(rows, texts):
        if text is None:
            continue
        qid = f"synthetic-{documents[row].id}"
        queries.append(Query(qid, text))
        qrels[qid] = {documents[r].id: 1 for r in sorted(duplicates.get(row, {row}))}
    return Dataset(f"{name}/synthetic", documents, queries, qrels)


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return f"sha256:{digest.hexdigest()}"
