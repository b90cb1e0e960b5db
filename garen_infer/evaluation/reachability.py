"""Reachability by hop distance (GAREN sec. 6.3 Fig. 4, App. C.1 Fig. 8), for any method.

Per judged query whose gold documents all lie outside the first-stage top 20: the minimum number of k-NN graph hops
from that top 20 to a gold document, and Hit@100: whether any gold document is among the first 100 of the output
(the documents the reranker observed, as the methods here output only observed documents by default).
"""

from __future__ import annotations

from garen_infer.index.hops import hop_distance

START = 20  # "the BM25 top-20 set" (sec. 6.3)
HITS_AT = 100


def reach(graph, first_stage: list[int], gold_rows: set[int], ranking: list[int]) -> dict | None:
    """{"min_hops", "hit@100"} for one query; None when a gold document is already in the first-stage top 20."""
    start = set(first_stage[:START])
    if start & gold_rows:
        return None
    return {"min_hops": hop_distance(start, gold_rows, graph.of), "hit@100": bool(gold_rows & set(ranking[:HITS_AT]))}


def hit_by_hops(reaches: list[dict | None]) -> dict:
    """Fig. 4's bars: per hop distance ("none" = farther than the search depth), the queries and their Hit@100."""
    groups: dict[str, list[bool]] = {}
    for r in reaches:
        if r is not None:
            groups.setdefault("none" if r["min_hops"] is None else str(r["min_hops"]), []).append(r["hit@100"])
    order = sorted(groups, key=lambda k: (k == "none", int(k) if k != "none" else 0))
    return {k: {"queries": len(groups[k]), "hit@100": round(sum(groups[k]) / len(groups[k]), 4)} for k in order}
