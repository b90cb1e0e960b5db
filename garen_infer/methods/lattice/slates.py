"""LATTICE's slates: what one scoring call shows the model, and how its answer is read (Gupta et al., arXiv
2510.13217, sec. 2.2 and App. D, Fig. 10; the reference code's slates).

A slate is the expanded node's children plus calibration references:
- leaf slate (every child is a document): up to ``num_leaf_calib`` = 10 leaves already reached in this query,
  all of them when there are at most 10, otherwise sampled without replacement with weight 4^(2s) above the GMM
  threshold of their calibrated scores s and 1e-4 below it; drawn once per iteration, shared by its leaf slates;
- internal slate: one reference, the reached node of the expanded node's own depth with the highest path
  relevance (none at the root).
The reference code draws from numpy's global RNG; here each query has its own seeded generator.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from garen_infer.llm.json_generation import repaired_json


@dataclass
class Slate:
    node: int  # the node being expanded
    children: list[int]  # its children shown (masked ones and those past the document budget left out)
    references: list[int]  # calibration references
    leaf: bool  # every child of the node is a document: the leaf prompt and reference leaves
    new_documents: list[int] = field(default_factory=list)  # corpus rows this slate shows for the first time

    @property
    def items(self) -> list[int]:
        return self.children + self.references


# ---- reference leaves: the GMM threshold rule ---------------------------------------------------------------------
def gmm_threshold(scores: np.ndarray, seed: int) -> float:
    """Where the density of a 2-component 1-D Gaussian mixture is lowest between its two means (0 if nowhere)."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture

    values = scores.reshape(-1, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gmm = GaussianMixture(n_components=2, random_state=seed).fit(values)
    grid = np.linspace(scores.min(), scores.max(), 1000)
    density = np.exp(gmm.score_samples(grid.reshape(-1, 1)))
    low, high = gmm.means_.min(), gmm.means_.max()
    between = (grid >= low) & (grid <= high)
    if not between.any():
        return 0.0
    return float(grid[between][np.argmin(density[between])])


def reference_leaves(leaves: np.ndarray, calibrated: np.ndarray, k: int, rng: np.random.Generator,
                     seed: int) -> list[int]:
    """Up to ``k`` reached leaves for a leaf slate, by the reference code's rule."""
    ranked = leaves[np.argsort(-calibrated[leaves], kind="stable")]
    if len(ranked) <= k:
        return ranked.tolist()
    s = np.maximum(calibrated[ranked], -1.0)
    threshold = gmm_threshold(s, seed)
    weight = np.where(s > threshold, 4.0 ** (2 * s), 1e-4)
    picked = rng.choice(len(ranked), size=k, replace=False, p=weight / weight.sum())
    return ranked[picked].tolist()


# ---- reading the model's answer -------------------------------------------------------------------------------
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def _find_key(obj, key: str):
    """The first value under ``key`` anywhere in nested dicts and lists (the reference code's recursive search)."""
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        values: Iterable = obj.values()
    elif isinstance(obj, list):
        values = obj
    else:
        return None
    for value in values:
        found = _find_key(value, key)
        if found is not None:
            return found
    return None


def _pairs(raw) -> list[tuple[Any, Any]]:  # JSON values, checked by the caller
    """[[id, score], ...], or [{"node_id"/"id": ..., "score"/"relevance_score": ...}, ...], or {"id": score}."""
    if isinstance(raw, dict):
        return list(raw.items())
    if not isinstance(raw, list):
        return []
    out = []
    for entry in raw:
        if isinstance(entry, (list, tuple)) and len(entry) >= 2:
            out.append((entry[0], entry[1]))
        elif isinstance(entry, dict):
            ident = next((entry[k] for k in ("node_id", "id", "candidate_id") if k in entry), None)
            score = next((entry[k] for k in ("relevance_score", "score") if k in entry), None)
            out.append((ident, score))
    return out


def parse_slate_scores(text: str, size: int) -> dict[int, float] | None:
    """Slate position -> score in [0, 1] from the JSON answer (repaired if need be); None when no valid pair is
    found (the node then stays on the frontier). Unlike the reference code, one malformed pair does not void the
    others; scores are clipped to 0-100 before scaling."""
    for candidate in _json_candidates(text):
        scores: dict[int, float] = {}
        for ident, value in _pairs(_find_key(repaired_json(candidate), "relevance_scores")):
            try:
                position, score = int(ident), float(value)
            except (TypeError, ValueError):
                continue
            if 0 <= position < size and math.isfinite(score):
                scores[position] = min(100.0, max(0.0, score)) / 100.0
        if scores:
            return scores
    return None


def _json_candidates(text: str) -> list[str]:
    """Where the answer's JSON may be, most likely first: the last fenced block (the reference code's reading); the
    span from the first ``{`` to the last ``}``, for a fenced answer whose reasoning quotes code in fences of its
    own (the fences then pair up wrongly); the whole text."""
    fenced = _FENCE.findall(text)
    start, end = text.find("{"), text.rfind("}")
    return [*fenced[-1:], *([text[start : end + 1]] if 0 <= start < end else []), text]
