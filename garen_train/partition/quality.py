"""How good a groups stage is as a partition of the k-NN graph, for disjoint and overlapping groups alike.

- modularity: Newman's, generalised to overlapping groups with belonging coefficients (Nicosia et al. 2009): a
  document of g groups belongs to each with 1/g, and Q = 1/2m sum_c [sum_ij A_ij a_ic a_jc - (sum_i d_i a_ic)^2 / 2m].
  For disjoint groups it is the usual modularity. ``modularity_primary`` is the modularity of the primary groups.
- conductance of a group S: cut(S) / min(vol(S), vol(rest)), on the undirected weighted k-NN graph (lower is a
  better separated group); reported as the mean and median over groups and the size-weighted mean.
- sizes (min, median, p90, max, mean, groups above App. A's s-bar = 20), overlap rate (documents in more than one
  group) and memberships per document.
- ``adjusted_rand_index`` compares two disjoint labelings (e.g. primary soft groups against Leiden's).
"""

from __future__ import annotations

import numpy as np
import torch

from garen_train.partition.objective import hard_modularity, overlap


def padded_memberships(doc_groups: list[tuple[int, ...]]) -> torch.Tensor:
    """(n, cap) group ids per row, ascending, padded with -1 in front (the layout ``objective.overlap`` reads)."""
    cap = max(len(gs) for gs in doc_groups)
    rows = torch.full((len(doc_groups), cap), -1, dtype=torch.long)
    for i, gs in enumerate(doc_groups):
        rows[i, cap - len(gs) :] = torch.tensor(sorted(gs))
    return rows


def partition_quality(graph, doc_groups: list[tuple[int, ...]], n_groups: int) -> dict:
    """``graph``: a PartitionGraph-like object (src, dst, weight, degree); ``doc_groups``: row -> its groups."""
    ids = padded_memberships(doc_groups)
    counts = (ids >= 0).sum(dim=1)
    belonging = (ids >= 0) / counts.unsqueeze(1)
    degree, src, dst, weight = graph.degree.double(), graph.src, graph.dst, graph.weight.double()
    two_m = float(degree.sum())
    flat = ids.clamp(min=0).reshape(-1)
    volume_share = torch.zeros(n_groups, dtype=torch.float64).index_add(
        0, flat, (belonging * degree.unsqueeze(1)).reshape(-1)
    )
    edge_term = float((weight * overlap(ids[src], belonging[src].double(), ids[dst], belonging[dst].double())).sum())
    modularity = edge_term / two_m - float((volume_share**2).sum()) / two_m**2

    # conductance: for each (row, group) membership, the weight of the row's edges that stay inside the group
    at = torch.searchsorted(ids[dst], ids[src]).clamp(max=ids.shape[1] - 1)
    inside = (ids[dst].gather(1, at) == ids[src]) & (ids[src] >= 0)
    internal = torch.zeros(ids.shape, dtype=torch.float64).index_add(0, src, inside * weight.unsqueeze(1))
    member = (ids >= 0).reshape(-1)
    group_of = ids.reshape(-1)[member]
    cut = torch.zeros(n_groups, dtype=torch.float64).index_add(0, group_of,
                                                               (degree.unsqueeze(1) - internal).reshape(-1)[member])
    vol = torch.zeros(n_groups, dtype=torch.float64).index_add(0, group_of,
                                                               degree.unsqueeze(1).expand_as(internal).reshape(-1)[member])
    sizes = torch.bincount(group_of, minlength=n_groups).numpy()
    present = sizes > 0
    conductance = (cut / torch.minimum(vol, two_m - vol).clamp(min=1e-12)).numpy()[present]

    primary = torch.tensor([gs[0] for gs in doc_groups])
    sizes = sizes[present]
    return {
        "groups": int(present.sum()),
        "modularity": round(modularity, 4),
        "modularity_primary": round(hard_modularity(graph, primary), 4),
        "conductance_mean": round(float(conductance.mean()), 4),
        "conductance_median": round(float(np.median(conductance)), 4),
        "conductance_size_weighted": round(float((conductance * sizes).sum() / sizes.sum()), 4),
        "size_min": int(sizes.min()), "size_median": float(np.median(sizes)),
        "size_p90": float(np.percentile(sizes, 90)),
        "size_max": int(sizes.max()), "size_mean": round(float(sizes.mean()), 2),
        "groups_over_20": int((sizes > 20).sum()),
        "overlap_rate": round(float((counts > 1).double().mean()), 4),
        "memberships_per_doc": round(float(counts.double().mean()), 4),
    }


def adjusted_rand_index(a, b) -> float:
    """Hubert and Arabie's adjusted Rand index of two labelings of the same rows (1 = identical partitions)."""
    from scipy.special import comb

    a, b = np.asarray(a), np.asarray(b)
    _, a = np.unique(a, return_inverse=True)
    _, b = np.unique(b, return_inverse=True)
    table = np.zeros((a.max() + 1, b.max() + 1), dtype=np.int64)
    np.add.at(table, (a, b), 1)
    pairs = comb(table, 2).sum()
    rows, cols, total = comb(table.sum(1), 2).sum(), comb(table.sum(0), 2).sum(), comb(len(a), 2)
    expected = rows * cols / total
    return float((pairs - expected) / (0.5 * (rows + cols) - expected))
