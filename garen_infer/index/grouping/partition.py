"""Group construction for GAREN (sec. 4.1, App. A, App. C.2): a partition of the corpus into groups.

- ``leiden``: Leiden on the k-NN corpus graph, optimising modularity (resolution 1.0, randomness 0.001), then
  every group of ``max_group_size`` (s̄ = 20) or more is re-partitioned on its own subgraph, recursively,
  while Leiden finds a non-trivial split (``cap_rule``: graspologic's reading; "exceeding" keeps groups of
  exactly s̄). Two engines behind ``leiden_backend``: ``graspologic`` (graspologic-native, which exposes both
  of the paper's parameters; the values are its defaults, which suggests the authors used it) and
  ``leidenalg`` (RBConfiguration = modularity at resolution 1.0; it has no randomness parameter).
- ``kmeans`` and ``random``: the App. C.2 controls, with as many groups as Leiden produces.
"""

from __future__ import annotations

import numpy as np
from tqdm.auto import tqdm

from garen_infer.errors import GarenError


def _undirected_edges(neighbours: np.ndarray, weights: np.ndarray, nodes: np.ndarray | None = None):
    """Symmetrised weighted edge list (u < v), restricted to ``nodes`` when given; self-loops dropped.

    An edge found from both ends counts once, with the larger weight. The dict lists edges in the order a scan of
    the rows (ascending) and their columns first meets them: Leiden's result depends on that order. Vectorised,
    and a restriction to ``nodes`` reads only those rows, so re-partitioning a group costs its size, not n."""
    n, k = neighbours.shape
    rows = np.arange(n) if nodes is None else np.unique(np.asarray(nodes, dtype=np.int64))
    inside = np.zeros(n, dtype=bool)
    inside[rows] = True
    src = np.repeat(rows, k)
    dst = neighbours[rows].reshape(-1).astype(np.int64)
    w = np.clip(weights[rows].reshape(-1).astype(np.float64), 1e-6, None)  # cosines can be <= 0; Leiden needs > 0
    mask = inside[dst] & (src != dst)
    src, dst, w = src[mask], dst[mask], w[mask]
    if not len(src):
        return {}
    key = np.minimum(src, dst) * n + np.maximum(src, dst)
    order = np.argsort(key, kind="stable")  # by edge; an edge's sightings stay in scan order
    starts = np.flatnonzero(np.diff(key[order], prepend=-1))
    largest = np.maximum.reduceat(w[order], starts)
    placed = np.argsort(order[starts])  # each edge where the scan first met it
    key, largest = key[order[starts]][placed], largest[placed]
    return dict(zip(zip((key // n).tolist(), (key % n).tolist()), largest.tolist()))


def _leiden_once(
    nodes: list[int], edges: dict, backend: str, resolution: float, randomness: float, seed: int
) -> list[list[int]]:
    """One Leiden run over a node set; isolated nodes (no edge inside the set) form one leftover group."""
    if not edges:
        return [nodes]
    if backend == "graspologic":
        import graspologic_native as gn

        edge_list = [(str(a), str(b), w) for (a, b), w in edges.items()]
        _, membership = gn.leiden(edge_list, resolution=resolution, randomness=randomness,
                                  use_modularity=True, seed=seed)
        labels = {int(k): v for k, v in membership.items()}
    elif backend == "leidenalg":
        import igraph as ig
        import leidenalg

        index = {node: i for i, node in enumerate(nodes)}
        graph = ig.Graph(n=len(nodes), edges=[(index[a], index[b]) for a, b in edges], directed=False)
        graph.es["weight"] = list(edges.values())
        part = leidenalg.find_partition(
            graph, leidenalg.RBConfigurationVertexPartition, weights="weight",
            resolution_parameter=resolution, seed=seed
        )
        labels = {nodes[i]: c for i, c in enumerate(part.membership)}
    else:
        raise GarenError(f"unknown leiden_backend '{backend}' (graspologic or leidenalg)")
    groups: dict[int, list[int]] = {}
    for node in nodes:
        groups.setdefault(labels.get(node, -1), []).append(node)
    return [sorted(g) for _, g in sorted(groups.items())]


CAP_RULES = ("graspologic", "exceeding")


def leiden_groups(neighbours, weights, *, max_group_size=20, resolution=1.0, randomness=0.001,
                  backend="graspologic", seed=42,
                  cap_rule="graspologic") -> list[list[int]]:
    """``cap_rule``: "graspologic" re-partitions groups of ``max_group_size`` or more (hierarchical_leiden's
    max_cluster_size: "membership >= max_cluster_size"), which gives App. F's maximum of 19 on LeetCode and
    TheoremQA-T; "exceeding" re-partitions only larger groups, as App. A words it ("groups exceeding s-bar")."""
    if cap_rule not in CAP_RULES:
        raise GarenError(f"unknown group cap_rule '{cap_rule}' ({' or '.join(CAP_RULES)})")
    small_enough = max_group_size - 1 if cap_rule == "graspologic" else max_group_size
    n = len(neighbours)
    final: list[list[int]] = []
    with tqdm(total=n, desc="leiden groups", unit="doc") as placed:  # documents in a group that is final
        queue = _leiden_once(list(range(n)), _undirected_edges(neighbours, weights), backend, resolution,
                             randomness, seed)
        while queue:
            group = queue.pop()
            if len(group) <= small_enough:
                final.append(group)
                placed.update(len(group))
                continue
            parts = _leiden_once(group, _undirected_edges(neighbours, weights, np.array(group)), backend,
                                 resolution, randomness, seed)
            if len(parts) <= 1:  # Leiden finds no non-trivial split (e.g. near-duplicates): keep it large (App. F)
                final.append(group)
                placed.update(len(group))
            else:
                queue.extend(parts)
    return sorted(final, key=lambda g: g[0])


def kmeans_groups(vectors: np.ndarray, n_groups: int, seed: int = 42) -> list[list[int]]:
    from garen_infer.index.knn_graph import faiss_module

    faiss = faiss_module()
    kmeans = faiss.Kmeans(vectors.shape[1], n_groups, niter=20, seed=seed, spherical=True, min_points_per_centroid=1)
    kmeans.train(np.ascontiguousarray(vectors, dtype=np.float32))
    _, labels = kmeans.index.search(np.ascontiguousarray(vectors, dtype=np.float32), 1)
    return groups_from_labels(labels.ravel())


def random_groups(n_docs: int, n_groups: int, seed: int = 42) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    labels = np.arange(n_docs) % n_groups
    rng.shuffle(labels)
    return groups_from_labels(labels)


def groups_from_labels(labels: np.ndarray) -> list[list[int]]:
    groups: dict[int, list[int]] = {}
    for row, label in enumerate(labels.tolist()):
        groups.setdefault(label, []).append(row)
    return sorted((g for g in groups.values()), key=lambda g: g[0])


def group_stats(groups: list[list[int]]) -> dict:
    sizes = np.array([len(g) for g in groups])
    return {"groups": int(len(groups)), "min": int(sizes.min()), "max": int(sizes.max()),
            "mean": round(float(sizes.mean()), 2)}
