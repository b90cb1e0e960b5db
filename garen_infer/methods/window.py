"""Back-to-front sliding-window listwise reranking (RankGPT: Sun et al., "Is ChatGPT Good at Search?
Investigating Large Language Models as Re-Ranking Agents", EMNLP 2023; rank_llm's loop: Sharifymoghaddam et
al., "RankLLM: A Python Package for Reranking with LLMs", SIGIR 2025, arXiv 2505.19284).

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
    bounds, end = [], n
    while end > start:
        lo = max(end - window, start)  # rank_llm clamps the last window to start
        bounds.append((lo, end))
        if lo == start:  # the window that reaches the front is the last one; rank_llm's test
            break  # `lo + stride != start` also skipped every window when n - start == window - stride
        end -= stride
    return bounds


def sliding_window(ranking: list[int], window: int = WINDOW, stride: int = STRIDE) -> Search:
    """Rerank ``ranking`` in place, back to front, and return it."""
    for lo, hi in window_bounds(len(ranking), window, stride):
        ranking[lo:hi] = yield Rerank(tuple(ranking[lo:hi]))
    return ranking
