"""``garen-train export --checkpoint CKPT --index DIR --dataset SPEC``: a trained soft partition becomes a groups
stage (``groups_soft`` by default) that ``garen-infer run --set methods.garen.groups=groups_soft`` reads.

Each document joins its best group, and each further group whose membership reaches ``--threshold``, up to
``--max-groups-per-doc`` groups. Groups that no document joins are dropped; the rest keep their order. The
groups are summarised by the index's own summarizer machinery (``garen_infer.index.grouping.groups``: cached by the
response cache, resumable), with the summarizer of the index's ``groups`` stage unless ``--summarizer`` says
otherwise, and written in the groups format (``garen_infer.index.grouping.groups_format``) with a manifest entry naming
the checkpoint, the export's params and the overlap rate.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

from garen_infer.errors import GarenError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--index", required=True, help="index folder of the corpus the partition was trained on")
    parser.add_argument("--dataset", required=True,
                        help="that corpus, for the group summaries: beir:<folder>[:split] | bright:<task> | jsonl:... ")
    parser.add_argument("--allow-empty-docs", action="store_true",
                        help="keep documents with neither title nor text (as when indexing)")
    parser.add_argument("--stage", default="groups_soft", help="stage name to write (default groups_soft)")
    parser.add_argument("--threshold", type=float, default=0.25, help="membership a further group needs (default 0.25)")
    parser.add_argument("--max-groups-per-doc", type=int, default=2,
                        help="cap on a document's groups (default 2; 1 = disjoint)")
    parser.add_argument("--summarizer",
                        help="summarizer model spec as JSON (default: the one of the index's groups stage)")


def memberships_to_groups(
    ids: torch.Tensor, values: torch.Tensor, threshold: float, cap: int
) -> tuple[list[list[int]], list[list[float]]]:
    """Groups (rows, in row order) and their members' memberships from sparse assignments (ids padded -1)."""
    if cap < 1:
        raise GarenError(f"--max-groups-per-doc must be at least 1, not {cap}")
    order = values.argsort(dim=1, descending=True, stable=True)[:, :cap]
    top_ids, top_values = ids.gather(1, order), values.gather(1, order)
    join = (top_values >= threshold) & (top_ids >= 0)
    join[:, 0] = True  # every document keeps its best group
    rows, slots = join.nonzero(as_tuple=True)
    group_of, weight = top_ids[rows, slots], top_values[rows, slots]
    members: dict[int, list[tuple[int, float]]] = {}
    for row, g, w in zip(rows.tolist(), group_of.tolist(), weight.tolist()):
        members.setdefault(g, []).append((row, w))
    kept = sorted(members)
    return [[r for r, _ in members[g]] for g in kept], [[w for _, w in members[g]] for g in kept]


def _sha256(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def export_groups(module, args: argparse.Namespace) -> dict:
    from garen_infer.data import load_dataset
    from garen_infer.index.folder import IndexFolder
    from garen_infer.index.grouping.groups import SoftGroupParams, finish_summaries, summarize_groups
    from garen_infer.index.grouping.groups_format import write_groups
    from garen_infer.index.stages import STAGES
    from garen_infer.storage.atomic import write_json
    from garen_infer.storage.writer_lock import writer_lock
    from garen_train.partition.graph import PartitionGraph

    if not args.stage.startswith("groups_") or args.stage in ("groups_kmeans", "groups_random"):
        raise GarenError(f"--stage '{args.stage}': name a learned groups stage 'groups_<name>' (e.g. groups_soft)")
    if not 0.0 <= args.threshold <= 1.0:
        raise GarenError(f"--threshold {args.threshold}: a membership threshold lies in [0, 1]")
    dataset = load_dataset(args.dataset, args.allow_empty_docs)
    folder = IndexFolder.open(args.index, dataset)
    trained_on = module.source["corpus"]
    if folder.manifest["corpus"]["fingerprint"] != trained_on["fingerprint"]:
        raise GarenError(f"{args.checkpoint}: trained on corpus '{trained_on['name']}' "
                         f"({trained_on['fingerprint']}), not on the corpus of {folder.path}")
    params = folder.params("groups")
    if args.summarizer:
        params = replace(params, summarizer=json.loads(args.summarizer))

    start = time.perf_counter()
    source = dict(module.source)
    module.attach(PartitionGraph.load(folder.path, source["hops"]))
    values = module.assign_all()
    groups, weights = memberships_to_groups(module.candidates.cpu(), values.cpu(), args.threshold,
                                            args.max_groups_per_doc)
    assign_seconds = time.perf_counter() - start
    stage_params = SoftGroupParams(checkpoint=str(Path(args.checkpoint).resolve()),
                                   checkpoint_sha256=_sha256(Path(args.checkpoint)),
                                   threshold=args.threshold, max_groups_per_doc=args.max_groups_per_doc,
                                   summarizer=params.summarizer)
    with writer_lock(folder.path, "index folder"):  # one writer per index folder, as 'garen-infer index' takes
        records, info = summarize_groups(folder, dataset, params, args.stage, groups)
        stats = write_groups(folder.path / args.stage, dataset.doc_ids, groups, records, weights)
        finish_summaries(folder, args.stage)
        entry = {
            "params": asdict(stage_params),
            "info": {**stats, "overlap_rate": stats.get("overlap_rate", 0.0), "groups_trained": module.n_groups,
                     "groups_without_members": module.n_groups - len(groups), "trained_on_index": source["index"],
                     "final_objective": (module.history or [{}])[-1], **info,
                     "assign_seconds": round(assign_seconds, 2), "seconds": round(time.perf_counter() - start, 2)},
            "built": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "requires": list(STAGES["groups_soft"].requires),  # so rebuilding any of them drops it, whatever its name
        }
        manifest = IndexFolder.open(folder.path).manifest  # as it is now, under the lock
        manifest["stages"][args.stage] = entry = folder.sealed_entry(args.stage, entry)  # its files' sizes and digests
        write_json(folder.path / "manifest.json", manifest)
    return {"stage": args.stage, "index": str(folder.path), **entry}
