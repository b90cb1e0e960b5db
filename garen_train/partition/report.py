"""``garen-train partition-report``: partition quality of groups stages, side by side, and GAREN's App. C.3 counts.

    garen-train partition-report --index DIR [--stage groups groups_soft groups_kmeans groups_random]
                                 [--run groups=RUN_DIR --run groups_soft=RUN_DIR ...] [--json]

For each stage: modularity (overlap-aware), conductance, size distribution, overlap rate, and the adjusted Rand
index of its primary groups against the ``groups`` (Leiden) stage (``quality.py``). For each ``--run`` (a
``garen-infer run --method garen`` folder on that stage): nDCG@10, R@100 and the C.3 counts from its
trace.jsonl: of the (query, gold document) pairs outside the initial window, how many had a gold group never
scored by the navigator and never selected for expansion (overlapping groups: a gold document's gold groups are
all of its groups; it counts as scored or selected when any of them was).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from garen_infer.errors import GarenError


def c3_counts(run: Path, stage: str) -> dict:
    """nDCG@10, R@100 and App. C.3 counts of a GAREN run folder on ``stage``."""
    config = _read_json(run / "config.json")
    used = config.get("method_options", {}).get("groups")
    if config.get("method") != "garen" or used != stage:
        raise GarenError(f"{run}: a run of method '{config.get('method')}' on groups '{used}', not GAREN on '{stage}'")
    pairs = scored = selected = 0
    with open(run / "trace.jsonl", encoding="utf-8") as handle:
        for line in handle:
            gold = json.loads(line).get("trace", {}).get("gold")
            if gold:
                pairs += gold["pairs_outside_window"]
                scored += gold["gold_group_scored"]
                selected += gold["gold_group_selected"]
    metrics = _read_json(run / "metrics.json") if (run / "metrics.json").is_file() else {}
    return {"nDCG@10": metrics.get("nDCG@10"), "R@100": metrics.get("R@100"), "gold_pairs_outside_window": pairs,
            "gold_group_never_scored": pairs - scored, "gold_group_never_selected": pairs - selected}


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise GarenError(f"{path}: missing (is this a garen-infer run folder?)") from None


def stage_report(folder, graph, stage: str, reference: list[int] | None) -> dict:
    from garen_train.partition.quality import adjusted_rand_index, partition_quality

    groups = folder.groups(stage)
    row = {"stage": stage, **partition_quality(graph, groups.doc_groups, len(groups.members))}
    if reference is not None:
        row["ari_vs_groups"] = round(adjusted_rand_index(groups.doc_group, reference), 4)
    return row


def markdown(rows: list[dict]) -> str:
    keys = list(dict.fromkeys(k for row in rows for k in row))
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(_cell(row.get(k)) for k in keys) + " |" for row in rows]
    return "\n".join(lines)


def _cell(value) -> str:
    """Four decimals for measures (the run's metrics come unrounded; --json keeps them whole)."""
    if value is None:
        return ""
    return f"{value:.4f}" if isinstance(value, float) and not value.is_integer() else str(value)


def main(argv: list[str]) -> int:
    from garen_infer.index.folder import IndexFolder
    from garen_train.partition.graph import PartitionGraph

    parser = argparse.ArgumentParser(prog="garen-train partition-report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", required=True, help="index folder")
    parser.add_argument("--stage", nargs="+", default=None,
                        help="groups stages to compare (default: every groups stage of the index)")
    parser.add_argument("--run", action="append", default=[], metavar="STAGE=RUN_DIR",
                        help="a GAREN run folder on STAGE, for nDCG, R@100 and C.3")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a markdown table")
    args = parser.parse_args(argv)
    folder = IndexFolder.open(args.index)
    stages = args.stage or [s for s in folder.manifest["stages"] if s == "groups" or s.startswith("groups_")]
    runs = {}
    for spec in args.run:
        stage, sep, run = spec.partition("=")
        if not sep:
            raise GarenError(f"--run '{spec}': expected STAGE=RUN_DIR")
        runs[stage] = Path(run)
    unknown = sorted(set(runs) - set(stages))
    if unknown:
        raise GarenError(f"--run names stage(s) {', '.join(unknown)} that the report does not cover "
                         f"({', '.join(stages)})")
    graph = PartitionGraph.load(folder.path, hops=None)
    reference = folder.groups("groups").doc_group if folder.has("groups") else None
    rows = []
    for stage in stages:
        row = stage_report(folder, graph, stage, reference)
        if stage in runs:
            row.update(c3_counts(runs[stage], stage))
        rows.append(row)
    print(json.dumps(rows, indent=2) if args.json else markdown(rows))
    return 0
