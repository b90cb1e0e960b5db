"""GAREN's diagnostics, computed after a query has finished (the method never sees the qrels):

- App. C.3: for each (query, gold document) pair outside the initial window, was the gold document's group ever
  scored by the navigator, and ever selected for expansion? With overlapping groups a gold document's gold groups
  are all of its groups: the pair counts as scored (selected) when any of them was.
- App. C.1: the minimum hop distance from the first-stage top-w to a gold document on the document graph (k-NN
  edges) and on the group graph (group A -> group B when a document of A points to a document of B).
"""

from __future__ import annotations

from garen_infer.index.hops import hop_distance


class GarenDiagnostics:
    def __init__(self, method) -> None:
        self.method = method
        self._group_edges: list[set[int]] | None = None

    def group_neighbours(self, g: int) -> set[int]:
        if self._group_edges is None:
            m = self.method
            edges: list[set[int]] = [set() for _ in m.members]
            for g_from, rows in enumerate(m.members):
                for d in rows:
                    edges[g_from].update(g for n in m.graph.of(d) for g in m.doc_groups[n])
                edges[g_from].discard(g_from)
            self._group_edges = edges
        return self._group_edges[g]

    def diagnose(self, state, gold_rows: set[int]) -> dict:
        m = self.method
        initial = set(state.first_stage[: m.config.window])
        outside = [d for d in sorted(gold_rows) if d not in initial]
        scored, selected = set(state.trace.get("scored_groups", [])), set(state.trace.get("selected_groups", []))
        gold_groups = {g for d in gold_rows for g in m.doc_groups[d]}
        start_groups = {g for d in initial for g in m.doc_groups[d]}
        return {
            "pairs_outside_window": len(outside),
            "gold_group_scored": sum(not scored.isdisjoint(m.doc_groups[d]) for d in outside),
            "gold_group_selected": sum(not selected.isdisjoint(m.doc_groups[d]) for d in outside),
            "min_hops_doc_graph": hop_distance(initial, set(gold_rows), m.graph.of),
            "min_hops_group_graph": hop_distance(start_groups, gold_groups, self.group_neighbours),
        }


def summarize(records: list[dict]) -> dict:
    """Aggregate per-query diagnostics into the run's metrics."""
    gold = [r["trace"]["gold"] for r in records if "gold" in r.get("trace", {})]
    pairs = sum(g["pairs_outside_window"] for g in gold)
    if not gold:
        return {}
    out = {"gold_pairs_outside_window": pairs}
    if pairs:
        out["gold_group_never_scored_rate"] = round(1 - sum(g["gold_group_scored"] for g in gold) / pairs, 4)
        out["gold_group_never_selected_rate"] = round(1 - sum(g["gold_group_selected"] for g in gold) / pairs, 4)
    for key in ("min_hops_doc_graph", "min_hops_group_graph"):
        hist: dict[str, int] = {}
        for g in gold:
            label = "none" if g[key] is None else str(g[key])
            hist[label] = hist.get(label, 0) + 1
        out[f"{key}_histogram"] = dict(sorted(hist.items(),
                                              key=lambda kv: (kv[0] == "none", int(kv[0]) if kv[0] != "none" else 0)))
    return out
