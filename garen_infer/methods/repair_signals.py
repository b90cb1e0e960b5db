"""REPAIR's step signals: how well each plan step is supported by the documents the reranker keeps, how much it
drives the reranker's order, and how consistent that order is with what the reranker preferred before.

The step to expand is the one that is under-supported yet pivotal (the authors' code, scripts/reranker.py):

    s(t) = support(t) - alpha * contribution(t) - beta * consistency(t);   target = argmin_t s(t)

- support(t): the mean over the kept documents K of sigmoid(sim(t, d)), sim the embedding similarity;
- contribution(t): nDCG@|K| of the window ordered by sim(t, .) and cut to |K|, judged by the reranker's order of
  K (grades |K|, |K| - 1, ..., 1 from its best down; trec_eval's linear gain, as the code evaluates it);
- consistency(t): the mean, over the pairs (a above b) of that same step order, of the Bradley-Terry probability
  e^n(a,b) / (e^n(a,b) + e^n(b,a)) that a beats b, n counting the reranker's earlier verdicts (``Verdicts``).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np


class Verdicts:
    """Pairwise wins the reranker has given: each kept document beats every document ranked below it in its
    window (the kept ones below it and every one left out), as the code counts them."""

    def __init__(self) -> None:
        self.wins: Counter = Counter()

    def record(self, kept: list[int], window: list[int]) -> None:
        dropped = [d for d in window if d not in kept]
        for i, a in enumerate(kept):
            for b in kept[i + 1:] + dropped:
                self.wins[a, b] += 1

    def probability(self, a: int, b: int) -> float:
        """P(a beats b) = e^n(a,b) / (e^n(a,b) + e^n(b,a)), computed stably."""
        return 1.0 / (1.0 + math.exp(self.wins[b, a] - self.wins[a, b]))


def ndcg(ranking: list[int], grades: dict[int, float], depth: int) -> float:
    """trec_eval's ndcg_cut: linear gains, log2 discounts, the ideal from the grades themselves."""
    dcg = sum(grades.get(d, 0.0) / math.log2(r + 2) for r, d in enumerate(ranking[:depth]))
    ideal = sum(g / math.log2(r + 2) for r, g in enumerate(sorted(grades.values(), reverse=True)[:depth]))
    return dcg / ideal if ideal > 0 else 0.0


@dataclass
class StepSignals:
    support: list[float]
    contribution: list[float]
    consistency: list[float]
    pivot: list[float]  # s(t); the target step has the smallest

    @property
    def target(self) -> int:
        return int(np.argmin(self.pivot))

    def as_trace(self) -> dict:
        names = ("support", "contribution", "consistency", "pivot")
        return {name: [round(v, 5) for v in getattr(self, name)] for name in names}


def step_signals(similarity: np.ndarray, window: list[int], kept: list[int], verdicts: Verdicts,
                 alpha: float, beta: float) -> StepSignals:
    """``similarity[t, i]``: plan step t against ``window[i]``; ``kept``: the reranker's best of that window, best
    first."""
    grades = {d: float(len(kept) - r) for r, d in enumerate(kept)}
    position = {d: i for i, d in enumerate(window)}
    support, contribution, consistency = [], [], []
    for sims in similarity:
        support.append(float(np.mean([_sigmoid(sims[position[d]]) for d in kept])))
        order = [window[i] for i in np.argsort(-sims, kind="stable")][: len(kept)]
        contribution.append(ndcg(order, grades, len(kept)))
        pairs = [verdicts.probability(a, b) for i, a in enumerate(order) for b in order[i + 1:]]
        consistency.append(float(np.mean(pairs)) if pairs else 0.5)
    pivot = [s - alpha * c - beta * k for s, c, k in zip(support, contribution, consistency)]
    return StepSignals(support, contribution, consistency, pivot)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-float(x)))
