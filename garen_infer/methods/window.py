"""Back-to-front sliding-window listwise reranking (RankGPT; rank_llm's loop, anchors.md sec. 6).

For 100 documents with window 20 and stride 10 the windows are [80,100), [70,90), ..., [0,20): 9 calls, so the
best documents bubble up to the front.
"""

from __future__ import annotations

from garen_infer.llm.requests import Rerank
from garen_infer.methods.base import Search

WINDOW = 20  # w, GAREN sec. 5 / rank_llm
STRIDE = 10  # the window keeps h = w - stride documents; GAREN's keep size h = 10


def window_bounds(n: int, window: int = WINDOW, stride: int = STRIDE, start: int = 0) -> list[tuple[int, int]]:
    """The [lo, hi) windows rank_llm visits over positions start..n, in visiting order."""
    bounds, end, lo = [], n, n - window
    while end > start and lo + stride != start:
        lo = max(lo, start)  # rank_llm clamps before stepping, which is what ends the loop after [0, w)
        bounds.append((lo, end))
        end, lo = end - stride, lo - stride
    return bounds


def sliding_window(ranking: list[int], window: int = WINDOW, stride: int = STRIDE) -> Search:
    """Rerank ``ranking`` in place, back to front, and return it."""
    for lo, hi in window_bounds(len(ranking), window, stride):
        ranking[lo:hi] = yield Rerank(tuple(ranking[lo:hi]))
    return ranking
