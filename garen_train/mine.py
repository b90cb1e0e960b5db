"""``garen-train mine``: replay GAREN on an index for every judged query of a split and write training pairs.

    garen-train mine --dataset beir:data/scifact:train --index idx/scifact --out mined/scifact-train
    garen-train mine --dataset beir:data/scifact:test  --index idx/scifact --out mined/scifact-test --evaluation

Writes ``groups.jsonl`` (the navigator's query-group pairs), ``documents.jsonl`` (a pointwise reranker's
query-document pairs) and ``manifest.json`` into ``--out`` (format: ``garen_train/mining/folder.py``), plus the
replayed GAREN run in ``--out/traversal`` (interrupted, the same command resumes it). The whole folder is locked
while a mine writes it, so two mines on one ``--out`` cannot both write it, and a folder of another command (an
index, a run, an export) is refused (``garen_infer/storage/folder_kinds.py``). Queries of an evaluation split
never enter
a training file (``garen_train/mining/guard.py``).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from garen_infer.configuration.presets import load_preset
from garen_infer.configuration.shards import parse_shard
from garen_infer.data import load_dataset
from garen_infer.data.dataset import Dataset, Query
from garen_infer.errors import GarenError
from garen_infer.index.first_stage import first_stage
from garen_infer.index.folder import IndexFolder
from garen_infer.running.runner import run_queries
from garen_infer.storage.writer_lock import writer_lock
from garen_train.mining import guard
from garen_train.mining.folder import write_mined
from garen_train.mining.pairs import (
    NegativeSampling,
    document_pairs,
    group_pairs,
    reranker_document_pairs,
    reranker_group_pairs,
)
from garen_train.mining.replay import Traversal, replay_garen


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="garen-train mine", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", required=True,
                        help="the split to mine; its judged queries are replayed (e.g. beir:<folder>:train)")
    parser.add_argument("--index", required=True,
                        help="an index folder of the same corpus (garen-infer index), with GAREN's stages")
    parser.add_argument("--out", required=True, help="output folder (resumable)")
    add_traversal_options(parser)
    parser.add_argument("--limit", type=int, help="only the first N judged queries")
    parser.add_argument("--shard",
                        help="I/N: mine only shard I of N of the judged queries (join the shards with "
                        "'garen-train merge')")

    held_out = parser.add_argument_group("evaluation split guard")
    held_out.add_argument("--eval-dataset", action="append", default=[], metavar="SPEC",
                          help="an evaluation split whose queries (by id or text) may not be mined for "
                               "training; repeatable. A BEIR folder's test and dev splits are always guarded")
    held_out.add_argument("--drop-eval-overlap", action="store_true",
                          help="leave queries that are also evaluation queries out (listed in the manifest) "
                          "instead of refusing")
    held_out.add_argument("--evaluation", action="store_true",
                          help="mine evaluation data (e.g. a test split, to measure a navigator): marked so, "
                          "training refuses it")
    return parser


def add_traversal_options(parser: argparse.ArgumentParser) -> None:
    """The options of GAREN's replay and of the labelling, shared with ``garen-train mine-synthetic``."""
    parser.add_argument("--preset", default="cpu-default",
                        help="models, first stage and GAREN options (default: cpu-default)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a preset field, e.g. models.navigator.model=...")
    parser.add_argument("--allow-empty-docs", action="store_true", help="keep documents with neither title nor text")
    parser.add_argument("--budget", type=int, help="GAREN's budget (default: the preset's)")
    parser.add_argument("--max-active-queries", type=int, help="queries in flight at once")
    negatives = parser.add_argument_group("hard negatives for documents.jsonl")
    defaults = NegativeSampling()
    negatives.add_argument("--negatives", type=int, default=defaults.count,
                           help=f"per query (default {defaults.count})")
    negatives.add_argument("--negative-depth", type=int, default=defaults.depth,
                           help=f"taken from the first-stage top N (default {defaults.depth})")
    negatives.add_argument("--negative-skip", type=int, default=defaults.skip,
                           help="skip the top N first-stage ranks (default 0)")
    negatives.add_argument("--negative-sampling", choices=("top", "random"), default=defaults.strategy,
                           help="the top-ranked candidates, or a seeded sample")
    negatives.add_argument("--seed", type=int, default=defaults.seed)

    parser.add_argument(
        "--labels",
        choices=("qrels", "reranker"),
        default="qrels",
        help="qrels (default): a group is positive when it holds a judged-relevant document; reranker: "
        "when one of its documents reached the top --reranker-top of GAREN's final ranking, negative "
        "when its documents were reranked and fell (no judgment read: queries without "
        "qrels can be mined)",
    )
    parser.add_argument("--reranker-top", type=int, default=10,
                        help="with --labels reranker: the top that counts as positive (default 10)")
    parser.add_argument("--scores", choices=("all", "groups", "none"), default="all",
                        help="record the preset navigator's P(yes) for group lines and document lines (all), "
                        "groups only, or none")
    parser.add_argument("--cache",
                        help="response cache file (default ~/.cache/garen/responses.sqlite, or $GAREN_CACHE_DIR)")
    parser.add_argument("--no-cache", action="store_true")


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    started = time.perf_counter()
    if args.evaluation and (args.eval_dataset or args.drop_eval_overlap):
        raise GarenError("--evaluation marks evaluation data, which needs no guard: drop --eval-dataset / "
                         "--drop-eval-overlap")
    if args.shard:
        parse_shard(args.shard)  # a malformed I/N is refused before anything loads
    with writer_lock(args.out, "mined folder"):  # a second writer is refused before any data loads
        return mine(args, started)


def mine(args: argparse.Namespace, started: float) -> int:
    negatives = NegativeSampling(args.negatives, args.negative_depth, args.negative_skip,
                                 args.negative_sampling, args.seed)
    preset = load_preset(args.preset, args.overrides)
    dataset = load_dataset(args.dataset, args.allow_empty_docs)
    if not dataset.qrels and args.labels == "qrels":
        raise GarenError(f"{args.dataset}: has no relevance judgements; mine it with --labels reranker, or "
                         "give a split with qrels")
    dataset, guarded = guarded_dataset(dataset, args)
    index = IndexFolder.open(args.index, dataset)
    pairs = mine_pairs(dataset, index, preset, args, negatives)
    manifest = {
        "purpose": "evaluation" if args.evaluation else "training",
        "dataset": {"spec": args.dataset, "name": dataset.name, "judged_queries": len(dataset.judged_queries()),
                    "mined_queries": pairs.queries},
        "guard": guarded,
        **pairs.manifest(args, index, negatives, started),
    }
    return finish(Path(args.out), pairs, manifest)


@dataclass
class LabelledTraversal:
    """GAREN's traversal of a set of queries, and the pairs it labels (before they are written)."""

    queries: int
    groups: list[dict]
    documents: list[dict]
    traversal: Traversal
    in_first_window: int
    seconds: dict[str, float]

    def manifest(self, args: argparse.Namespace, index: IndexFolder, negatives: NegativeSampling,
                 started: float) -> dict:
        """The manifest's fields on the index, preset, traversal, labelling, counts and timings."""
        traversal, fields = self.traversal, {}
        fields["index"] = {"path": str(index.path), "corpus": index.manifest["corpus"],
                           "stages": traversal.saved_config["index_stages"]}
        fields["preset"] = {"name": args.preset, "overrides": args.overrides}
        fields["traversal"] = {"folder": "traversal", "config": traversal.saved_config, "metrics": traversal.metrics}
        labels = {"labels": args.labels,
                  **({"reranker_top": args.reranker_top, "reranker": traversal.config.models.get("reranker")}
                     if args.labels == "reranker" else {})}
        fields["mining"] = {**labels, "negatives": asdict(negatives), "scores": args.scores,
                            "score_model": traversal.config.models.get("navigator") if args.scores != "none" else None}
        fields["counts"] = count_pairs(self.groups, self.documents, self.in_first_window)
        fields["seconds"] = {**self.seconds, "total": round(time.perf_counter() - started, 2)}
        if "shard" in traversal.saved_config:
            fields["shard"] = traversal.saved_config["shard"]
        return fields


def mine_pairs(
    dataset: Dataset, index: IndexFolder, preset: dict, args: argparse.Namespace, negatives: NegativeSampling
) -> LabelledTraversal:
    """Replay GAREN on the dataset's judged queries (resumable, in ``--out/traversal``) and label what it scored."""
    from garen_infer.llm.cache import NoCache, ResponseCache

    cache = NoCache() if args.no_cache else ResponseCache(args.cache)
    out = Path(args.out)
    traversal = replay_garen(dataset, index, preset, out / "traversal", cache, args.budget, args.limit,
                             args.max_active_queries, args.shard)

    queries = run_queries(dataset, traversal.config)
    start = time.perf_counter()
    rankings = first_stage(index, [q.text for q in queries], traversal.config.first_stage)
    first_stage_seconds = time.perf_counter() - start
    if args.labels == "reranker":
        groups, documents, initial_gold = label_by_reranker(queries, out / "traversal", traversal,
                                                            args.reranker_top, dataset)
    else:
        groups, documents, initial_gold = label_queries(dataset, queries, rankings, traversal, negatives)
    in_first_window = sum(
        g["item"] in initial_gold.get(g["qid"], set()) for g in groups if g["provenance"] == "unreached_gold"
    )

    start = time.perf_counter()
    score_lines(traversal.navigator, {"all": groups + documents, "groups": groups, "none": []}[args.scores])
    seconds = {"traversal": round(traversal.seconds, 2), "first_stage": round(first_stage_seconds, 2),
               "scoring": round(time.perf_counter() - start, 2)}
    return LabelledTraversal(len(queries), groups, documents, traversal, in_first_window, seconds)


def finish(out: Path, pairs: LabelledTraversal, manifest: dict) -> int:
    """Write the folder (manifest last) and say what it holds."""
    manifest = write_mined(out, pairs.groups, pairs.documents, manifest)
    counts = manifest["counts"]
    print(f"[mine] {out}: {counts['groups']['lines']} group pairs ({counts['groups']['positive_rate']:.1%} positive, "
          f"{counts['groups']['unreached_gold']} unreached gold), {counts['documents']['lines']} document pairs "
          f"({counts['documents']['positive_rate']:.1%} positive) from {pairs.queries} queries "
          f"({manifest['purpose']} data)")
    return 0


def guarded_dataset(dataset: Dataset, args) -> tuple[Dataset, dict]:
    """The split with every evaluation query refused (or, with --drop-eval-overlap, left out), and what was done."""
    if args.evaluation:
        return dataset, {"evaluation_splits": [], "dropped": []}
    if guard.is_evaluation_split(args.dataset):
        raise GarenError(f"{dataset.name} is an evaluation split: mine it with --evaluation (the output is then marked "
                         "evaluation data, which training refuses), or mine a training split")
    specs = list(dict.fromkeys([*args.eval_dataset, *guard.automatic_evaluation_specs(args.dataset)]))
    held_out = {}
    for spec in specs:
        evaluation = load_dataset(spec, args.allow_empty_docs)
        held_out[evaluation.name] = (spec, evaluation.judged_queries())
    if not specs:
        print(f"[mine] warning: no evaluation split to guard {dataset.name} against (name one with --eval-dataset)")
    queries = dataset.judged_queries()
    dropped = []
    try:
        guard.check_disjoint(queries, dataset.name, {name: qs for name, (_, qs) in held_out.items()})
    except guard.EvaluationOverlap as err:
        if not args.drop_eval_overlap:
            raise GarenError(f"{err}; pass --drop-eval-overlap to leave them out, or mine another split") from None
        dropped = err.overlaps
        print(f"[mine] --drop-eval-overlap: {err} (left out)")
    gone = {o.qid for o in dropped}
    kept = [q for q in dataset.queries if q.id not in gone]
    record = {
        "evaluation_splits": [
            {"spec": spec, "name": name, "queries": len(qs)} for name, (spec, qs) in held_out.items()
        ],
        "match": "query id, or query text ignoring case and spacing",
        "dropped": [asdict(o) for o in dropped],
    }
    return Dataset(dataset.name, dataset.documents, kept,
                   {q: j for q, j in dataset.qrels.items() if q not in gone}), record


def label_queries(dataset: Dataset, queries: list[Query], rankings: list[list[int]], traversal,
                  negatives: NegativeSampling):
    """Group and document lines for each query, and the gold groups its first window already held (App. C.3)."""
    groups, documents, initial_gold = [], [], {}
    method = traversal.method
    for query, ranking in zip(queries, rankings):
        judgments = dataset.qrels.get(query.id, {})
        gold = {dataset.doc_index[d] for d, rel in judgments.items() if rel > 0 and d in dataset.doc_index}
        iterations = traversal.records[query.id]["trace"].get("iterations", [])
        groups += group_pairs(query, iterations, gold, method.doc_group, method.texts)
        documents += document_pairs(query, judgments, ranking, dataset.documents, dataset.doc_index, negatives)
        initial_gold[query.id] = {str(method.doc_group[r]) for r in ranking[: method.config.window] if r in gold}
    return groups, documents, initial_gold


def label_by_reranker(queries: list[Query], folder: Path, traversal, top: int, dataset: Dataset):
    """Group and document lines labelled by the reranker's final ranking of each query (pairs.py), no judgment read."""
    from garen_infer.storage.trec import read_run

    if top < 1:
        raise GarenError(f"--reranker-top {top}: need at least 1")
    run, method = read_run(folder / "run.trec"), traversal.method
    groups, documents = [], []
    for query in queries:
        ranked = sorted(run.get(query.id, {}).items(), key=lambda item: -item[1])
        ranking = [dataset.doc_index[d] for d, _ in ranked if d in dataset.doc_index]
        iterations = traversal.records[query.id]["trace"].get("iterations", [])
        groups += reranker_group_pairs(query, iterations, ranking, top, method.doc_groups, method.texts)
        documents += reranker_document_pairs(query, ranking, top, dataset.documents)
    return groups, documents, {}


def score_lines(navigator, lines: list[dict]) -> None:
    if navigator is None or not lines:
        return
    for line, score in zip(lines, navigator.scores_for([(line["query"], line["text"]) for line in lines])):
        line["score"] = score


def count_pairs(groups: list[dict], documents: list[dict], unreached_in_first_window: int) -> dict:
    """Counts, positive rates and the App. C.3 view of the gold groups (``unreached_in_first_window``: unreached
    gold groups whose gold documents the first stage already put in GAREN's first window)."""
    scored = [g for g in groups if g["provenance"] == "scored"]
    unreached = [g for g in groups if g["provenance"] == "unreached_gold"]
    scored_gold = sum(g["label"] for g in scored)
    queries = {g["qid"] for g in groups} | {d["qid"] for d in documents}

    def rate(pos: int, n: int) -> float:
        return round(pos / n, 4) if n else 0.0

    return {
        "queries": len(queries),
        "groups": {
            "lines": len(groups), "positives": sum(g["label"] for g in groups),
            "positive_rate": rate(sum(g["label"] for g in groups), len(groups)),
            "scored": len(scored), "scored_positives": scored_gold,
            "scored_positive_rate": rate(scored_gold, len(scored)),
            "unreached_gold": len(unreached),
            "unreached_gold_in_first_window": unreached_in_first_window,
            "gold_groups": scored_gold + len(unreached),
            "gold_groups_never_scored_rate": rate(len(unreached), scored_gold + len(unreached)),
            "queries_with_a_scored_gold_group": len({g["qid"] for g in scored if g["label"]}),
            "mean_scored_per_query": round(len(scored) / max(len(queries), 1), 2),
        },
        "documents": {
            "lines": len(documents), "positives": sum(d["label"] for d in documents),
            "positive_rate": rate(sum(d["label"] for d in documents), len(documents)),
            "judged": sum(d["provenance"] == "judged" for d in documents),
            "hard_negatives": sum(d["provenance"] == "hard_negative" for d in documents),
            "positives_beyond_first_stage": sum(d["label"] and d["rank"] is None for d in documents),
        },
    }
