"""Top-down (divisive) semantic tree, LATTICE sec. 2.1 and App. B.3.2:

    summaries[d] = the generator's description of document d at L levels, broad to specific (L = 5)
    partition(the root over every document), where partition(node) is:
        level = the most specific level whose distinct summaries, over the node's documents, are at least
                min_clusters and fit the clustering prompt (the context budget)
        the generator groups those distinct summaries into [min_clusters, M] clusters, each named and described
        each document follows its summary into a cluster -> a child node (a one-document cluster is the document
                itself, a leaf child)
        each child with more than M documents: partition(child), asked as soon as this answer is in (a node's
                children depend on its own partition only, so no depth waits for its slowest answer)
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
from collections import Counter
from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from garen_infer.index.grouping.partition import kmeans_groups
from garen_infer.index.grouping.summaries import ExtractiveSummarizer, group_text
from garen_infer.index.tree.semantic_tree import BuiltNode
from garen_infer.llm.json_generation import JsonStream, generate_json, repaired_json


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


def level_chat(text: str, params):
    """The prompt asking for one document's ``summary_levels`` summaries (App. B.3.2)."""
    from garen_infer.llm.prompts import lattice_levels

    return lattice_levels(text, params.summary_levels, params.summary_max_words)


class TopDownBuilder:
    def __init__(self, doc_texts: list[str], doc_vectors: np.ndarray, generator, params, log=print):
        self.texts, self.vectors, self.generator, self.p, self.log = (
            doc_texts,
            np.asarray(doc_vectors, np.float32),
            generator,
            params,
            log,
        )
        self.extractive = ExtractiveSummarizer(doc_texts, self.vectors)
        self.min_clusters = min(params.min_clusters, params.max_children)
        self.stats = TopDownStats()

    # ---- step 1: multi-level summaries of every document -------------------------------------------------------
    def document_levels(self, answers: list | None = None) -> list[list[str]]:
        """Every document's levels: ``answers`` (each parsed answer or None, e.g. from the shards of
        ``index --shard I/N``), or asked of the generator; a None gets the counted extractive fallback."""
        levels = self.p.summary_levels
        if answers is None:
            chats = [level_chat(t, self.p) for t in self.texts]
            answers = generate_json(self.generator, chats, lambda _, text: parse_levels(text, levels),
                                    self.p.retries, self.p.batch_size, "document summaries")
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

    # ---- step 2: partition oversized nodes, each as soon as its parent's partition is in -----------------------
    def build(self, level_answers: list | None = None) -> tuple[BuiltNode, list[list[str]]]:
        """A node's children depend only on its own partition, so each oversized node's clustering prompt is sent
        as soon as its parent is partitioned (``JsonStream``: every one in flight on a server, batches on a local
        engine) and no depth waits for its slowest answer. The tree does not depend on the order answers arrive:
        a node's children are fixed, in its clusters' order, when its own partition is in."""
        from garen_infer.llm.prompts import lattice_cluster

        levels = self.document_levels(level_answers)
        root = BuiltNode("", "root")
        asked: list[tuple[BuiltNode, list[int], int, int, list[str]]] = []  # (node, rows, depth, level, keys)

        def parse(item: int, text: str):
            return parse_clusters(text, len(asked[item][4]), self.p.max_children)

        stream = JsonStream(self.generator,
                            lambda item: lattice_cluster(asked[item][4], self.min_clusters, self.p.max_children),
                            parse, self.p.retries, self.p.batch_size)
        tally = _DepthTally(self.log)
        with tqdm(total=0, desc="tree clustering", unit="node") as bar:

            def place(node: BuiltNode, rows: list[int], depth: int) -> None:
                """The node's documents as its leaves, or its partition asked of the generator (or, when no level fits
                the prompt, made by k-means at once, its children placed in turn)."""
                todo: list = [(node, rows, depth)]
                while todo:
                    node, rows, depth = todo.pop()
                    if node is None:  # a k-means node's children are all placed: it is closed after them
                        tally.closed(depth, kmeans=True)
                        continue
                    if len(rows) <= self.p.max_children:
                        node.children.extend(rows)
                        continue
                    tally.opened(depth)
                    plan = self.choose_level(rows, levels)
                    if plan is None:
                        self.stats.no_level_fits += 1
                        todo.append((None, rows, depth))
                        todo.extend((child, members, depth + 1) for child, members in self.split(node, rows, None))
                        continue
                    asked.append((node, rows, depth, *plan))
                    stream.ask(len(asked) - 1)
                    bar.total = (bar.total or 0) + 1  # opened at 0: tqdm types total as Optional

            place(root, list(range(len(self.texts))), 0)
            for item, answer in stream:
                node, rows, depth, level, keys = asked[item]
                clusters = None if answer is None else self.assign(rows, level, keys, levels, answer)
                for child, members in self.split(node, rows, clusters):
                    place(child, members, depth + 1)
                tally.closed(depth, kmeans=clusters is None)
                bar.update(1)
        return root, levels

    def split(self, node: BuiltNode, rows: list[int], clusters) -> list[tuple[BuiltNode, list[int]]]:
        """Fix ``node``'s children from its clusters (None: the k-means fallback, counted): a one-document cluster
        is the document itself; the others become child nodes, returned with their documents to be placed."""
        if clusters is None:
            self.stats.partition_fallbacks += 1
            clusters = self.kmeans_split(rows)
        below = []
        for desc, source, members in clusters:
            if len(members) == 1:
                node.children.append(members[0])
                continue
            child = BuiltNode(desc, source)
            node.children.append(child)
            below.append((child, members))
        return below

    def choose_level(self, rows: list[int], levels: list[list[str]]) -> tuple[int, list[str]] | None:
        """The most specific level whose distinct summaries over ``rows`` number at least min_clusters and fit the
        clustering prompt's budget (App. B.3.2), with those summaries; None if no level does."""
        for level in reversed(range(self.p.summary_levels)):
            keys = list(dict.fromkeys(levels[r][level] for r in rows))
            if (
                len(keys) >= self.min_clusters
                and sum(len(k.split()) + 1 for k in keys) <= self.p.clustering_context_words
            ):
                return level, keys
        return None

    def assign(self, rows: list[int], level: int, keys: list[str], levels: list[list[str]], clusters) -> list | None:
        """Documents follow their level summary into its cluster; the ones left out join the nearest centroid."""
        cluster_of_key = {keys[k]: c for c, (_, members) in enumerate(clusters) for k in members}
        members: list[list[int]] = [[] for _ in clusters]
        left_out: list[int] = []
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


class _DepthTally:
    """Progress by depth: a depth is done when none of its nodes waits for a partition and the depth above is done
    (only its nodes open nodes below), and then it is logged once."""

    def __init__(self, log) -> None:
        self.log, self.depth = log, 0
        self.open: Counter = Counter()
        self.partitioned: Counter = Counter()
        self.kmeans: Counter = Counter()

    def opened(self, depth: int) -> None:
        self.open[depth] += 1

    def closed(self, depth: int, kmeans: bool) -> None:
        self.open[depth] -= 1
        self.partitioned[depth] += 1
        self.kmeans[depth] += kmeans
        while self.partitioned[self.depth] and not self.open[self.depth]:
            self.log(f"[semantic_tree] top-down depth {self.depth}: {self.partitioned[self.depth]} nodes partitioned, "
                     f"{self.kmeans[self.depth]} by k-means")
            self.depth += 1
