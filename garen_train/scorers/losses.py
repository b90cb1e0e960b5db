"""Losses on relevance logits (log-odds: P(relevant) = sigmoid(logit), which for a yes/no LM is exactly the
inference navigator's softmax over the [no, yes] logits).

- ``pointwise``: binary cross-entropy of P(relevant) against each pair's 0/1 label.
- ``listwise``: per list (a query's positive with its hard negatives), softmax cross-entropy: minus the log of
  the probability mass the softmax over the list puts on its positives (localized contrastive estimation,
  Gao et al. 2021, generalised to several positives); optionally a weighted mean over lists
  (``iteration_weights``: lists whose positive GAREN reaches late count more). It only orders items within a
  query; the pointwise term
  (``pointwise_weight``) keeps the probabilities calibrated across queries.
- ``distillation``: per list, KL(teacher || student) between the softmax of a teacher's scores (an embedding
  model's cosine over temperature) and the softmax of the logits: a graded target for every negative of the
  list, where the labels say only which item is gold.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

LOSSES = ("pointwise", "listwise")


def pointwise_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.binary_cross_entropy_with_logits(logits, labels)


def listwise_loss(logits: torch.Tensor, labels: torch.Tensor, groups: torch.Tensor,
                  weights: torch.Tensor | None = None) -> torch.Tensor:
    """Mean over the lists that hold a positive of -log(sum of softmax over the list at its positives); with
    ``weights`` (per pair; a list takes its positive's), the mean weighted by them."""
    losses, list_weights = [], []
    for group in torch.unique(groups):
        members = groups == group
        positive = labels[members] > 0.5
        if not positive.any() or positive.all():
            continue
        scores = logits[members]
        losses.append(torch.logsumexp(scores, 0) - torch.logsumexp(scores[positive], 0))
        list_weights.append(weights[members][positive].max() if weights is not None else logits.new_ones(()))
    if not losses:
        return logits.sum() * 0.0
    stacked = torch.stack(list_weights).to(logits.dtype)
    return (torch.stack(losses) * stacked).sum() / stacked.sum()


def iteration_weights(iterations: torch.Tensor, unreached: int) -> torch.Tensor:
    """1 + the GAREN iteration that scored each pair's group (a gold group never scored: 1 + ``unreached``): a
    positive the traversal reaches late, or never, lies far from the first stage, where the navigator decides."""
    return 1.0 + torch.where(iterations < 0, torch.full_like(iterations, unreached), iterations).double()


def training_loss(kind: str, logits, labels, groups, pointwise_weight: float = 0.0,
                  weights: torch.Tensor | None = None) -> torch.Tensor:
    if kind == "pointwise":
        return pointwise_loss(logits, labels)
    loss = listwise_loss(logits, labels, groups, weights)
    if pointwise_weight:
        loss = loss + pointwise_weight * pointwise_loss(logits, labels)
    return loss


def distillation_loss(logits: torch.Tensor, teacher: torch.Tensor, groups: torch.Tensor) -> torch.Tensor:
    """Mean over lists of KL(softmax(teacher) || softmax(logits)); ``teacher`` is already divided by its temperature."""
    losses = []
    for group in torch.unique(groups):
        members = groups == group
        target = torch.log_softmax(teacher[members], 0)
        losses.append(F.kl_div(torch.log_softmax(logits[members], 0), target, log_target=True, reduction="sum"))
    return torch.stack(losses).mean()
