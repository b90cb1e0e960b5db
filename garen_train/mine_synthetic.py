"""``garen-train mine-synthetic``: training pairs for a corpus with no judgments, from queries written from it.

    garen-train mine-synthetic --corpus data/cranfield --index idx/cranfield --out mined/cranfield-synthetic
    garen-train mine-synthetic --corpus data/corpus.jsonl --index idx/mine --out mined/mine-synthetic \\
        --writer generator --set 'models.generator={backend: vllm, model: Qwen/Qwen3-8B}'

Samples documents stratified over GAREN's groups, writes a query from each (``--writer``: extractive,
deterministic and model-free; or generator, a doc2query prompt to the preset's ``models.generator``, cached
and counted) and keeps ``--queries`` of them: every query (``--keep all``, the default), or only those whose
source document the first stage finds but ranks beyond GAREN's first window (``--keep beyond-window``): there
the navigator decides whether the source is found, while a source the first window holds is reranked
whatever the navigator says, so its query teaches the navigator little. The kept queries replay GAREN
exactly as ``garen-train mine`` does (``garen_train/mine.py``), and the groups holding the source document
(or a document of the same text) are labelled positive and every other group the navigator scored negative.
The folder is ``garen-train mine``'s (``garen_train/mining/folder.py``), marked ``purpose: training``; its
manifest's ``inputs`` names the one file read (the corpus, with its digest) and records ``judgments: none
read``: the command reads ``corpus.jsonl`` only, never ``queries.jsonl`` or ``qrels/``.
"""

from __future__ import annotations

import argparse
import hashlib
import time
from collections import Counter
from pathlib import Path

from garen_infer.configuration.presets import load_preset
from garen_infer.data.beir import read_corpus
from garen_infer.data.dataset import Dataset, Query
from garen_infer.errors import GarenError
from garen_infer.index.folder import IndexFolder
from garen_infer.storage.writer_lock import writer_lock
from garen_train.mine import add_traversal_options, finish, mine_pairs
from garen_train.mining.pairs import NegativeSampling
from garen_train.mining.synthetic import (
    STYLES,
    ExtractiveWriter,
    GeneratorWriter,
    duplicate_rows,
    sample_documents,
)

WRITE_BATCH = 64  # documents per generator call
NO_JUDGMENTS = (
    "none read: queries are written from the corpus, and each query's positives are its source document "
    "and the documents of the same text"
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="garen-train mine-synthetic", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", required=True,
                        help="a BEIR folder (only its corpus.jsonl is read) or a corpus.jsonl file (_id, title, text)")
    parser.add_argument("--index", required=True,
                        help="an index folder of that corpus (garen-infer index), with GAREN's stages")
    parser.add_argument("--out", required=True, help="output folder (resumable)")
    parser.add_argument("--queries", type=int, default=500, help="documents to write a query from (default 500)")
    parser.add_argument("--writer", choices=("extractive", "generator"), default="extractive",
                        help="extractive (the document's own words; no model) or generator (doc2query with "
                        "models.generator)")
    parser.add_argument("--style", choices=STYLES, default="mixed",
                        help="the extractive writer's query form (default mixed: one per document)")
    parser.add_argument("--keep", choices=("all", "beyond-window"), default="all",
                        help="all (default): every query written; beyond-window: only queries whose source "
                             "the first stage ranks beyond GAREN's first window")
    parser.add_argument("--candidates", type=int,
                        help="with --keep beyond-window: write from at most this many documents "
                             "(default: all)")
    add_traversal_options(parser)  # --seed among them: it seeds the document sample and the style choice too
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.queries < 1:
        raise GarenError(f"--queries {args.queries}: need at least 1")
    if args.candidates is not None and args.candidates < 1:
        raise GarenError(f"--candidates {args.candidates}: need at least 1")
    with writer_lock(args.out, "mined folder"):
        return mine_synthetic(args, time.perf_counter())


def corpus_file(given: str) -> Path:
    path = Path(given)
    file = path / "corpus.jsonl" if path.is_dir() else path
    if not file.is_file():
        raise GarenError(f"--corpus {path}: no corpus.jsonl there (give a BEIR folder or a corpus.jsonl file)")
    return file


def mine_synthetic(args: argparse.Namespace, started: float) -> int:
    negatives = NegativeSampling(args.negatives, args.negative_depth, args.negative_skip,
                                 args.negative_sampling, args.seed)
    preset = load_preset(args.preset, args.overrides)
    file = corpus_file(args.corpus)
    documents = read_corpus(file, args.allow_empty_docs)
    name = file.parent.name if file.name == "corpus.jsonl" else file.stem
    index = IndexFolder.open(args.index, Dataset(name, documents, []))

    groups = index.groups(preset.get("methods", {}).get("garen", {}).get("groups", "groups"))
    writer = make_writer(args, preset, documents, index)
    start = time.perf_counter()
    if args.keep == "all":
        rows = sample_documents(groups.members, documents, args.queries, args.seed)
        texts = [q for i in range(0, len(rows), WRITE_BATCH) for q in writer.write(rows[i : i + WRITE_BATCH])]
        selection = None
    else:
        candidates = sample_documents(groups.members, documents, args.candidates or len(documents), args.seed)
        rows, texts, selection = beyond_first_window(candidates, writer, index, preset, documents,
                                                     args.queries)
    writing_seconds = round(time.perf_counter() - start, 2)
    dataset = synthetic_dataset(name, documents, rows, texts)
    kept = f"; {selection['kept']} of {selection['written']} beyond the first window" if selection else ""
    print(f"[mine-synthetic] {len(dataset.queries)} queries from {writer.counts.asked} documents of {name} "
          f"({writer.name} writer; {sum(writer.counts.unusable.values())} unusable{kept}) "
          f"in {writing_seconds} s")
    if not dataset.queries:
        which = "whose source the first stage ranks beyond GAREN's first window (try --keep all) " \
            if selection else ""
        raise GarenError(f"{args.corpus}: the {writer.name} writer wrote no usable query {which}"
                         f"from {writer.counts.asked} documents")

    args.shard = args.limit = None  # `mine`'s options this command does not take
    pairs = mine_pairs(dataset, index, preset, args, negatives)
    manifest = {
        "purpose": "training",
        "dataset": {"spec": f"synthetic:{file}", "name": dataset.name, "judged_queries": len(dataset.queries),
                    "mined_queries": pairs.queries},
        "inputs": {"corpus": {"path": str(file), "sha256": file_digest(file)}, "judgments": NO_JUDGMENTS},
        "synthetic": {"writer": writer.name, "style": args.style if writer.name == "extractive" else None,
                      "generator": preset["models"].get("generator") if writer.name == "generator" else None,
                      "sampled_documents": writer.counts.asked, "seed": args.seed,
                      "counts": writer.counts.as_dict(), "keep": args.keep, "selection": selection,
                      "seconds": writing_seconds},
        "guard": {"evaluation_splits": [], "dropped": [], "note": "no query of any split is read"},
        **pairs.manifest(args, index, negatives, started),
    }
    return finish(Path(args.out), pairs, manifest)


def beyond_first_window(candidates: list[int], writer, index, preset: dict, documents, wanted: int):
    """Write from ``candidates`` in their order, a batch at a time, until ``wanted`` queries have a source (or
    a document of the same text) that the first stage ranks beyond GAREN's first window but within its depth.
    Returns the kept rows, their texts, and how the sources of every query written ranked."""
    from garen_infer.index.first_stage import FirstStageConfig, first_stage
    from garen_infer.methods.base import get_method, make_config

    window = make_config(get_method("garen"), (preset.get("methods") or {}).get("garen") or {}).window
    config = FirstStageConfig(**(preset.get("first_stage") or {}))
    duplicates = duplicate_rows(documents)
    rows: list[int] = []
    texts: list[str] = []
    ranks: Counter[str] = Counter()
    for start in range(0, len(candidates), WRITE_BATCH):
        batch = candidates[start : start + WRITE_BATCH]
        written = [(row, text) for row, text in zip(batch, writer.write(batch)) if text is not None]
        rankings = first_stage(index, [text for _, text in written], config) if written else []
        for (row, text), ranking in zip(written, rankings):
            sources = duplicates.get(row, {row})
            rank = next((i + 1 for i, r in enumerate(ranking) if r in sources), None)
            where = "beyond_depth" if rank is None else \
                "in_first_window" if rank <= window else "beyond_first_window"
            ranks[where] += 1
            if where == "beyond_first_window" and len(rows) < wanted:
                rows.append(row)
                texts.append(text)
        if len(rows) >= wanted:
            break
    rule = (f"source ranked by the first stage ({config.kind}, depth {config.depth}) beyond GAREN's "
            f"first window ({window})")
    selection = {"rule": rule, "written": sum(ranks.values()), "kept": len(rows),
                 "source_ranks": dict(sorted(ranks.items()))}
    return rows, texts, selection


def make_writer(args: argparse.Namespace, preset: dict, documents, index):
    if args.writer == "extractive":
        embed = index.embedder.encode_documents if args.style == "reworded" else None
        return ExtractiveWriter(documents, args.style, args.seed, embed)
    spec = preset["models"].get("generator")
    if not spec:
        raise GarenError(f"--writer generator: preset {args.preset} has no models.generator (set one with "
                         "--set 'models.generator={...}')")
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
