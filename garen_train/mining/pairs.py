"""The labelling rules, one query at a time.

Groups (the navigator's training pairs): every group GAREN asked the navigator to score, in the order it asked,
labelled 1 when the group holds a gold document (qrels relevance > 0); then every gold group the traversal never
scored, labelled 1 with provenance ``unreached_gold`` (the App. C.3 cases: the navigator never had a chance).

With ``--labels reranker`` no judgment is read: the labels are the reranker's, as GAREN's traversal made them.
A group the navigator scored is positive when one of its documents reached the top ``top`` of the traversal's
final ranking (the reranker's order of everything it saw), negative when its documents were reranked and none
got there, and left out when none of its documents was reranked (nothing was learnt about it). Documents: the
top ``top`` positive, the other reranked documents negative (provenance ``reranker``).

Documents (a pointwise reranker's training pairs): every judged document (label 1 when relevance > 0, else 0),
then hard negatives: unjudged documents of the first-stage ranking, never a query's excluded ids.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from garen_infer.data.dataset import Document, Query
from garen_infer.errors import GarenError


@dataclass(frozen=True)
class NegativeSampling:
    count: int = 10  # hard negatives per query
    depth: int = 100  # taken from the first-stage top `depth`: what a reranker at budget 100 is shown
    skip: int = 0  # ignore the top `skip` ranks, where unjudged documents are most often relevant
    strategy: str = "top"  # "top": the highest-ranked candidates; "random": a sample, seeded per query
    seed: int = 0

    def __post_init__(self):
        if self.strategy not in ("top", "random"):
            raise GarenError(f"negative sampling '{self.strategy}' is not 'top' or 'random'")
        if self.count < 0 or self.skip < 0 or self.depth < self.skip:
            raise GarenError("hard negatives: need count >= 0 and 0 <= skip <= depth (got count "
                             f"{self.count}, skip {self.skip}, depth {self.depth})")


def pair(query: Query, kind: str, item: str, text: str, label: int, provenance: str,
         iteration: int | None = None, rank: int | None = None) -> dict:
    """One line of groups.jsonl / documents.jsonl (the contract in ``folder.py``); ``score`` is filled later."""
    return {"qid": query.id, "query": query.text, "kind": kind, "item": item, "text": text, "label": label,
            "provenance": provenance, "iteration": iteration, "rank": rank, "score": None}


def group_pairs(query: Query, iterations: list[dict], gold_rows: set[int], doc_group, texts: list[str]) -> list[dict]:
    """``iterations``: GAREN's trace (each step's ``t`` and ``scored`` group ids); ``texts``: the navigator's view."""
    gold_groups = {doc_group[r] for r in gold_rows}
    lines, scored = [], set()
    for step in iterations:
        for g in step["scored"]:
            if g not in scored:  # GAREN scores a group once per query; a repeat would add nothing
                scored.add(g)
                lines.append(pair(query, "group", str(g), texts[g], int(g in gold_groups), "scored",
                                  iteration=step["t"]))
    for g in sorted(gold_groups - scored):
        lines.append(pair(query, "group", str(g), texts[g], 1, "unreached_gold"))
    return lines


def document_pairs(query: Query, judgments: dict[str, int], ranking: list[int], documents: list[Document],
                   doc_index: dict[str, int], negatives: NegativeSampling) -> list[dict]:
    """``judgments``: the query's qrels (document id -> relevance); ``ranking``: first-stage corpus rows, best
    first. ``rank`` is the 1-based first-stage position (None beyond the first stage's depth)."""
    rank = {row: i + 1 for i, row in enumerate(ranking)}
    unranked = len(ranking) + 1
    judged = sorted((doc_index[d], rel) for d, rel in judgments.items() if d in doc_index)
    judged.sort(key=lambda item: rank.get(item[0], unranked))  # by first-stage rank, then corpus order
    lines = [pair(query, "document", documents[r].id, documents[r].full_text, int(rel > 0), "judged", rank=rank.get(r))
             for r, rel in judged]
    candidates = [r for r in ranking[negatives.skip : negatives.depth]
                  if documents[r].id not in judgments and documents[r].id not in query.excluded_ids]
    if negatives.strategy == "random":
        chosen = random.Random(f"{negatives.seed}:{query.id}").sample(candidates, min(negatives.count, len(candidates)))
        chosen.sort(key=rank.__getitem__)
    else:
        chosen = candidates[: negatives.count]
    lines += [
        pair(query, "document", documents[r].id, documents[r].full_text, 0, "hard_negative", rank=rank[r])
        for r in chosen
    ]
    return lines


def reranker_group_pairs(query: Query, iterations: list[dict], ranking: list[int], top: int, doc_groups,
                         texts: list[str]) -> list[dict]:
    """``ranking``: the traversal's final ranking (corpus rows, best first): what the reranker judged, in its order."""
    winners = {g for r in ranking[:top] for g in doc_groups[r]}
    judged = {g for r in ranking for g in doc_groups[r]}
    lines, seen = [], set()
    for step in iterations:
        for g in step["scored"]:
            if g not in seen and g in judged:
                seen.add(g)
                lines.append(pair(query, "group", str(g), texts[g], int(g in winners), "reranker", iteration=step["t"]))
    return lines


def reranker_document_pairs(query: Query, ranking: list[int], top: int, documents: list[Document]) -> list[dict]:
    return [pair(query, "document", documents[r].id, documents[r].full_text, int(i < top), "reranker", rank=i + 1)
            for i, r in enumerate(ranking)]
