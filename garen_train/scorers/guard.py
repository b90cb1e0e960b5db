"""Non-regression by construction: trained weights are exported only when the held-out queries say they rank better
than the weights the job started from.

A corpus without judgments gives one signal of whether adapting helped: the synthetic queries the job holds out
(the validation split of the mined pairs). With ``objective.non_regression`` the job scores them with its
untrained weights before the first step (for the bi-encoder these are the zero-shot navigator) and again after
training. The trained weights are kept when the mean per-query AUC gain is above zero with one-sided 95%
confidence, by a seeded paired bootstrap over the held-out queries; else the export writes the untrained weights
and says why. The confidence bound is what makes this a guard: on Cranfield a recipe whose held-out AUC rose by
0.002 over 14 queries lost 0.007 nDCG@10 on the test queries (docs/design/training.md).
"""

from __future__ import annotations

import numpy as np

DRAWS = 10_000
LEVEL = 0.05  # one-sided: the 5th percentile of the bootstrapped mean gain must be above zero
TRAINED, UNTRAINED = "trained", "untrained"


def decide(before: dict[str, float], after: dict[str, float], seed: int = 0) -> dict:
    """Which weights to export, from each held-out query's AUC before and after training (query -> AUC)."""
    common = sorted(set(before) & set(after))
    rule = (f"trained weights kept when the mean per-query AUC gain on the held-out queries is above 0 with "
            f"one-sided {1 - LEVEL:.0%} confidence (paired bootstrap over queries, {DRAWS} draws, seed {seed})")
    if not common:
        return {"keep": UNTRAINED, "queries": 0, "rule": rule,
                "reason": "no held-out query with a positive and a negative pair"}
    gains = np.array([after[q] - before[q] for q in common])
    draws = np.random.default_rng(seed).integers(0, len(gains), size=(DRAWS, len(gains)))
    lower = float(np.percentile(gains[draws].mean(1), 100 * LEVEL))
    return {
        "keep": TRAINED if lower > 0 else UNTRAINED, "queries": len(common),
        "auc_untrained": round(float(np.mean([before[q] for q in common])), 6),
        "auc_trained": round(float(np.mean([after[q] for q in common])), 6),
        "gain": round(float(gains.mean()), 6), "gain_lower_bound": round(lower, 6), "rule": rule,
    }


def describe(decision: dict) -> str:
    """One line for the export's output."""
    if not decision["queries"]:
        return f"non-regression guard: {decision['reason']}: exported the untrained weights"
    which = (
        "the trained weights"
        if decision["keep"] == TRAINED
        else "the untrained weights (the trained ones are not better beyond noise)"
    )
    return (
        f"non-regression guard: held-out AUC {decision['auc_untrained']:.4f} untrained -> "
        f"{decision['auc_trained']:.4f} trained "
        f"over {decision['queries']} queries (gain {decision['gain']:+.4f}, 95% lower bound "
        f"{decision['gain_lower_bound']:+.4f}): exported {which}"
    )
