"""``garen-train merge SHARD... --dataset SPEC --out DIR``: the folders of ``garen-train mine --shard i/n`` joined into
the folder an unsharded mine writes.

The shards must be one mine (the same split, guard, index, preset, negatives and scores; their traversals one run
configuration), disjoint and complete, as ``garen-infer merge`` checks for run folders. The traversals are merged
by ``garen-infer merge`` into ``traversal/``; ``groups.jsonl`` and ``documents.jsonl`` take each query's lines in the
split's query order, so both files equal an unsharded mine's; the manifest's counts are recomputed and its
seconds are the shards' summed. ``--partial`` merges what is there, marked ``"partial"`` in the manifest.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from garen_infer.configuration.shards import Shard
from garen_infer.data import load_dataset
from garen_infer.data.dataset import Dataset
from garen_infer.errors import GarenError
from garen_infer.running.merge import (
    MERGE_RECORD,
    check_one_configuration,
    check_out_folder,
    merge_runs,
    missing_shards,
    what_it_computes,
)
from garen_infer.storage.append_log import read_finished
from garen_infer.storage.writer_lock import writer_lock
from garen_train.mine import count_pairs
from garen_train.mining.folder import MANIFEST, read_mined, write_mined

# what may differ between the shards of one mine: their own share and how long it took
PER_SHARD = ("manifest_sha256", "shard", "files", "counts", "seconds", "traversal", "dataset")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="garen-train merge", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("shards", nargs="+", metavar="SHARD", help="the folders of 'garen-train mine --shard I/N'")
    parser.add_argument("--dataset", required=True, help="the split the shards mined (the --dataset they were given)")
    parser.add_argument("--allow-empty-docs", action="store_true")
    parser.add_argument("--out", required=True, help="the merged mined folder")
    parser.add_argument("--partial", action="store_true",
                        help="merge the shards there are, into a folder marked partial")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    with writer_lock(args.out, "mined folder"):
        manifest = merge_mined(load_dataset(args.dataset, args.allow_empty_docs), args.shards, args.out, args.partial)
    counts = manifest["counts"]
    print(f"[merge] {args.out}: {counts['groups']['lines']} group pairs, {counts['documents']['lines']} document pairs "
          f"from {manifest['dataset']['mined_queries']} queries" + (" (partial)" if "partial" in manifest else ""))
    return 0


def merge_mined(dataset: Dataset, folders: list[str | Path], out: str | Path, partial: bool = False) -> dict:
    paths, out = [Path(f) for f in folders], Path(out)
    check_out_folder(out, paths, earlier=Path("traversal") / MERGE_RECORD)
    shards = [read_mined(f) for f in paths]
    for pairs in shards:
        if "shard" not in pairs.manifest:
            raise GarenError(f"{pairs.folder}: not a shard (its {MANIFEST} has no 'shard'); only folders of "
                             "'garen-train mine --shard I/N' are merged")
    headers = [
        (
            p.folder,
            _what_it_mined(p.manifest),
            Shard(p.manifest["shard"]["index"], p.manifest["shard"]["count"]),
        )
        for p in shards
    ]
    count = check_one_configuration(headers)
    missing = missing_shards([s for _, _, s in headers], count)
    if missing and not partial:
        raise GarenError(f"shard {missing[0]} is missing ({len(missing)} of {count} not given); mine it and "
                         f"merge again, or pass --partial for a folder marked partial")
    first = shards[0].manifest
    dropped = {d["qid"] for d in first["guard"].get("dropped", [])}  # the queries the guard left out of every shard
    mined = Dataset(dataset.name, dataset.documents, [q for q in dataset.queries if q.id not in dropped],
                    {q: j for q, j in dataset.qrels.items() if q not in dropped})
    metrics = merge_runs(mined, [f / "traversal" for f in paths], out / "traversal", partial, log=lambda *_: None)
    traversal_config = json.loads((out / "traversal" / "config.json").read_text(encoding="utf-8"))
    order = {qid: k for k, qid in enumerate(read_finished(out / "traversal" / "trace.jsonl", "qid"))}
    # stable: a query's own order
    groups = sorted((line for p in shards for line in p.groups), key=lambda line: order[line["qid"]])
    documents = sorted((line for p in shards for line in p.documents), key=lambda line: order[line["qid"]])
    manifest = {k: v for k, v in first.items() if k not in ("format", "files", "shard", "manifest_sha256")}
    manifest["dataset"] = {**first["dataset"], "mined_queries": len(order)}
    manifest["traversal"] = {**first["traversal"], "config": traversal_config, "metrics": metrics}
    manifest["counts"] = count_pairs(
        groups,
        documents,
        sum(p.manifest["counts"]["groups"]["unreached_gold_in_first_window"] for p in shards),
    )
    manifest["seconds"] = {key: round(sum(p.manifest["seconds"][key] for p in shards), 2) for key in first["seconds"]}
    if "partial" in metrics:
        manifest["partial"] = metrics["partial"]
    return write_mined(out, groups, documents, manifest)


def _what_it_mined(manifest: dict) -> dict:
    """A shard's manifest without its share (counts, files, timings), with its traversal's run configuration."""
    config = {k: v for k, v in manifest.items() if k not in PER_SHARD}
    config["dataset"] = {k: v for k, v in manifest["dataset"].items() if k != "mined_queries"}
    traversal = {k: v for k, v in manifest["traversal"]["config"].items() if k != "shard"}
    config["traversal"] = what_it_computes(traversal)
    return config

