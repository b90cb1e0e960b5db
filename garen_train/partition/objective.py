"""DMoN's clustering objective (Tsitsulin et al., "Graph Clustering with Graph Neural Networks", JMLR 2023; the
spectral and cluster losses of torch-geometric's ``DMoNPooling``) for sparse graphs, sparse assignments and
mini-batches.

A document's assignment s_i is a distribution over its candidate groups: ``ids[i]`` (sorted ascending, padded
with -1 in front) and ``values[i]`` (0 on the padding). With d_i the weighted degree, 2M = sum_i d_i and C groups:

    L = -Q + lambda * R
    Q = 1/(2M) sum_ij A_ij <s_i, s_j>  -  1/(2M)^2 sum_c V_c^2,    V_c = sum_i d_i s_ic     (soft modularity)
    R = sqrt(C)/n * ||Z||_2 - 1,                                  Z_c = sum_i s_ic         (collapse regulariser)

On a whole graph with dense assignments, -Q is DMoNPooling's spectral loss and R its cluster loss (a test checks
the equality). In a mini-batch B the other documents' assignments come from a memory (their values at their last
visit, detached), as historical embeddings make GNN mini-batches exact (GNNAutoScale, Fey et al. 2021):

    T_B = sum over edges (i, j), i in B, of A_ij <s_i, s_j> * (1 if j in B else 2)
    V_B = V_memory - sum_{i in B} d_i s_i^memory + sum_{i in B} d_i s_i     (Z_B likewise, weight 1)
    L_B = -(T_B / 2M - |V_B|^2 / (2M)^2) + lambda R(Z_B)

L_B differs from L by terms without the batch, so its gradient with respect to the batch is L's.
"""

from __future__ import annotations

import math

import torch


def overlap(ids_a: torch.Tensor, values_a: torch.Tensor, ids_b: torch.Tensor, values_b: torch.Tensor) -> torch.Tensor:
    """<s_a, s_b> row by row for sparse assignments (E x M each) whose id rows are sorted ascending (padding -1
    first): each id of a is looked up in b's row by binary search, so memory stays E x M, not E x M x M."""
    at = torch.searchsorted(ids_b, ids_a).clamp(max=ids_b.shape[1] - 1)
    match = (ids_b.gather(1, at) == ids_a) & (ids_a >= 0)
    return (values_a * values_b.gather(1, at) * match).sum(dim=1)


def per_group(ids: torch.Tensor, values: torch.Tensor, weight: torch.Tensor | None, n_groups: int) -> torch.Tensor:
    """sum_i weight_i s_ic for every group c (the padding adds zeros to group 0)."""
    contribution = values if weight is None else values * weight.unsqueeze(1)
    return torch.zeros(n_groups, dtype=values.dtype, device=values.device).index_add(
        0, ids.clamp(min=0).reshape(-1), contribution.reshape(-1)
    )


def dmon_loss(edge_term: torch.Tensor, volume: torch.Tensor, size: torch.Tensor, two_m: float, n: int,
              collapse_weight: float) -> dict:
    """L = -Q + lambda R from the edge term (sum A_ij <s_i, s_j>), the group volumes V and the group sizes Z."""
    modularity = edge_term / two_m - (volume * volume).sum() / (two_m * two_m)
    collapse = math.sqrt(len(size)) / n * torch.linalg.vector_norm(size) - 1
    return {"loss": -modularity + collapse_weight * collapse, "modularity": modularity, "collapse": collapse}


@torch.no_grad()
def full_objective(graph, ids: torch.Tensor, values: torch.Tensor, n_groups: int, collapse_weight: float) -> dict:
    """The exact objective of assignments for the whole corpus, plus the modularity of their argmax partition."""
    chunk = max(1024, (1 << 23) // ids.shape[1])  # edges per step: bounds the E x M temporaries
    device = values.device
    degree = graph.degree.to(device)
    edge_term = 0.0
    for start in range(0, len(graph.dst), chunk):
        src, dst = graph.src[start : start + chunk].to(device), graph.dst[start : start + chunk].to(device)
        edge_term += float(
            (
                graph.weight[start : start + chunk].to(device)
                * overlap(ids[src], values[src], ids[dst], values[dst])
            ).sum()
        )
    volume, size = per_group(ids, values, degree, n_groups), per_group(ids, values, None, n_groups)
    out = {k: float(v) for k, v in dmon_loss(torch.tensor(edge_term), volume.cpu(), size.cpu(),
                                             float(degree.sum()), len(ids), collapse_weight).items()}
    out["modularity_hard"] = hard_modularity(graph, ids.gather(1, values.argmax(dim=1, keepdim=True)).squeeze(1).cpu())
    return out


def hard_modularity(graph, labels: torch.Tensor) -> float:
    """Newman's modularity of a partition (one label per row) on the weighted graph."""
    same = labels[graph.src] == labels[graph.dst]
    two_m = float(graph.degree.sum())
    volume = torch.zeros(int(labels.max()) + 1, dtype=torch.float64).index_add(0, labels, graph.degree.double())
    return float((graph.weight.double() * same).sum()) / two_m - float((volume * volume).sum()) / (two_m * two_m)
