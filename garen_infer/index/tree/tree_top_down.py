"""Top-down (divisive) semantic tree, LATTICE sec. 2.1 and App. B.3.2:

    summaries[d] = the generator's description of document d at L levels, broad to specific (L = 5)
    queue = [root over every document]
    while queue holds a node with more than M documents:
        for each such node (one batch per depth):
            level = the most specific level whose distinct summaries, over the node's documents, are at least
                    min_clusters and fit the clustering prompt (the context budget)
            the generator groups those distinct summaries into [min_clusters, M] clusters, each named and described
            each document follows its summary into a cluster -> a child node (a one-document cluster is the
                    document itself, a leaf child)
    nodes with at most M documents take them as leaves

Failures are explicit and counted in the manifest, never silent:
- a document whose level summaries are not valid JSON after the retries gets extractive levels (its 1..L most
  distinctive terms);
- a node that no level fits, or whose clustering answer is unusable after the retries (not JSON, fewer than two
  non-empty clusters, more than M), is split by spherical k-means instead, with extractive descriptions;
- documents whose summary the generator left out of every cluster join the cluster with the nearest centroid.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np

from garen_infer.index.grouping.partition import kmeans_groups
from garen_infer.index.grouping.summaries import ExtractiveSummarizer, group_text
from garen_infer.index.tree.semantic_tree import BuiltNode
from garen_infer.llm.json_generation import generate_json, repaired_json


@dataclass
class TopDownStats:
    level_fallbacks: int = 0  # documents described by extractive levels
    partition_fallbacks: int = 0  # nodes split by k-means
    no_level_fits: int = 0  # ... of which no summary level fitted the clustering prompt
    unassigned: int = 0  # documents placed by nearest centroid


def parse_levels(text: str, levels: int) -> list[str] | None:
    obj = repaired_json(text)
    if isinstance(obj, dict):
        obj = obj.get("levels")
    if not isinstance(obj, list) or len(obj) < levels:
        return None
    out = [" ".join(str(x).split()) for x in obj[:levels]]
    return out if all(out) else None


def parse_clusters(text: str, n_keys: int, max_clusters: int) -> list[tuple[str, list[int]]] | None:
    """[(description, key ids)] from the clustering answer, each key in its first cluster only; None if unusable."""
    obj = repaired_json(text)
    if isinstance(obj, dict):
        obj = obj.get("clusters")
    if not isinstance(obj, list):
        return None
    taken: set[int] = set()
    out = []
    for cluster in obj:
        if not isinstance(cluster, dict) or not isinstance(cluster.get("members"), list):
            continue
        members = []
        for m in cluster["members"]:
            try:
                key = int(m)
            except (TypeError, ValueError):
                continue
            if 0 <= key < n_keys and key not in taken:
                taken.add(key)
                members.append(key)
        name, description = str(cluster.get("name") or "").strip(), str(cluster.get("description") or "").strip()
        if members and (name or description):
            out.append((": ".join(part for part in (name, description) if part), members))
    return out if 2 <= len(out) <= max_clusters else None


class TopDownBuilder:
    def __init__(self, doc_texts: list[str], doc_vectors: np.ndarray, generator, params, log=print):
        self.texts, self.vectors, self.generator, self.p, self.log = doc_texts, np.asarray(doc_vectors, np.float32), generator, params, log
        self.extractive = ExtractiveSummarizer(doc_texts, self.vectors)
        self.min_clusters = min(params.min_clusters, params.max_children)
        self.stats = TopDownStats()

    # ---- step 1: multi-level summaries of every document -------------------------------------------------------
    def document_levels(self) -> list[list[str]]:
        from garen_infer.llm.prompts import lattice_levels

        levels = self.p.summary_levels
        chats = [lattice_levels(t, levels, self.p.summary_max_words) for t in self.texts]
        answers = generate_json(self.generator, chats, lambda _, text: parse_levels(text, levels), self.p.retries, self.p.batch_size, "document summaries")
        terms = copy.copy(self.extractive)  # the same term weights (one pass over the corpus), ``levels`` terms
        terms.n_terms = levels
        out = []
        for row, answer in enumerate(answers):
            if answer is None:
                self.stats.level_fallbacks += 1
                words = [w for w in terms.summarize([row])["concept"].split(", ") if w] or ["(no text)"]
                answer = [", ".join(words[: k + 1]) for k in range(levels)]
            out.append(answer)
        return out

    # ---- step 2: partition oversized nodes, one depth at a time (one batch of clustering prompts per depth) -------
    def build(self) -> tuple[BuiltNode, list[list[str]]]:
        levels = self.document_levels()
        root = BuiltNode("", "root")
        queue = [(root, list(range(len(self.texts))))]
        depth = 0
        while queue:
            oversized = []
            for node, rows in queue:
                if len(rows) <= self.p.max_children:
                    node.children.extend(rows)
                else:
                    oversized.append((node, rows))
            partitions = self.llm_partitions([rows for _, rows in oversized], levels, depth)
            queue = []
            for (node, rows), clusters in zip(oversized, partitions):
                if clusters is None:
                    self.stats.partition_fallbacks += 1
                    clusters = self.kmeans_split(rows)
                for desc, source, members in clusters:
                    if len(members) == 1:  # a one-document cluster is the document itself
                        node.children.append(members[0])
                        continue
                    child = BuiltNode(desc, source)
                    node.children.append(child)
                    queue.append((child, members))
            depth += 1
            if oversized:
                self.log(f"[semantic_tree] top-down depth {depth}: {len(oversized)} nodes partitioned, "
                         f"{self.stats.partition_fallbacks} by k-means so far")
        return root, levels

    def choose_level(self, rows: list[int], levels: list[list[str]]) -> tuple[int, list[str]] | None:
        """The most specific level whose distinct summaries over ``rows`` number at least min_clusters and fit the
        clustering prompt's budget (App. B.3.2), with those summaries; None if no level does."""
        for level in reversed(range(self.p.summary_levels)):
            keys = list(dict.fromkeys(levels[r][level] for r in rows))
            if len(keys) >= self.min_clusters and sum(len(k.split()) + 1 for k in keys) <= self.p.clustering_context_words:
                return level, keys
        return None

    def llm_partitions(self, nodes: list[list[int]], levels: list[list[str]], depth: int) -> list:
        """For each node: [(description, source, documents)] from the generator's clustering, or None."""
        from garen_infer.llm.prompts import lattice_cluster

        plans = [self.choose_level(rows, levels) for rows in nodes]
        self.stats.no_level_fits += sum(plan is None for plan in plans)
        asked = [(i, plan) for i, plan in enumerate(plans) if plan is not None]
        chats = [lattice_cluster(keys, self.min_clusters, self.p.max_children) for _, (_, keys) in asked]
        def parse(j: int, text: str):
            return parse_clusters(text, len(asked[j][1][1]), self.p.max_children)

        answers = generate_json(self.generator, chats, parse, self.p.retries, self.p.batch_size,
                                f"clustering at depth {depth}")
        out: list = [None] * len(nodes)
        for (i, (level, keys)), answer in zip(asked, answers):
            if answer is not None:
                out[i] = self.assign(nodes[i], level, keys, levels, answer)
        return out

    def assign(self, rows: list[int], level: int, keys: list[str], levels: list[list[str]], clusters) -> list | None:
        """Documents follow their level summary into its cluster; the ones left out join the nearest centroid."""
        cluster_of_key = {keys[k]: c for c, (_, members) in enumerate(clusters) for k in members}
        members: list[list[int]] = [[] for _ in clusters]
        left_out = []
        for r in rows:
            c = cluster_of_key.get(levels[r][level])
            (left_out if c is None else members[c]).append(r)
        filled = [c for c, m in enumerate(members) if m]
        if len(filled) < 2:
            return None  # no split: every placed document landed in one cluster
        if left_out:
            self.stats.unassigned += len(left_out)
            centroids = np.stack([self.vectors[members[c]].mean(axis=0) for c in filled])
            for r in left_out:
                members[filled[int(np.argmax(centroids @ self.vectors[r]))]].append(r)
        return [(desc, self.generator.name, sorted(m)) for (desc, _), m in zip(clusters, members) if m]

    def kmeans_split(self, rows: list[int]) -> list[tuple[str, str, list[int]]]:
        """The fallback: spherical k-means into min(M, ceil(n / M)) clusters (at least 2), extractive descriptions."""
        k = max(2, min(self.p.max_children, math.ceil(len(rows) / self.p.max_children)))
        parts = kmeans_groups(self.vectors[rows], k, self.p.seed)
        if len(parts) < 2:  # identical vectors: consecutive chunks
            size = math.ceil(len(rows) / k)
            parts = [list(range(i, min(i + size, len(rows)))) for i in range(0, len(rows), size)]
        out = []
        for part in parts:
            docs = sorted(rows[i] for i in part)
            summary = self.extractive.summarize(docs)
            out.append((group_text(summary["concept"], summary["summary"]), "extractive", docs))
        return out
