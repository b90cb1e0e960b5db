"""Back-to-front sliding windows (rank_llm semantics), driven by hand with a scripted reranker."""

from __future__ import annotations

import pytest

from garen_infer.methods.window import sliding_window, window_bounds
from garen_infer.testing.methods import drive as drive_search
from garen_infer.testing.methods import scripted_answers


@pytest.mark.parametrize(
    "n, expected",
    [
        (100, [(80, 100), (70, 90), (60, 80), (50, 70), (40, 60), (30, 50), (20, 40), (10, 30), (0, 20)]),
        (25, [(5, 25), (0, 15)]),
        (20, [(0, 20)]),
        (10, [(0, 10)]),  # a list no longer than the stride is still reranked, in one window
        (7, [(0, 7)]),
        (0, []),
    ],
)
def test_window_bounds(n, expected):
    assert window_bounds(n, window=20, stride=10) == expected


def test_window_bounds_defaults_and_start():
    assert window_bounds(100) == window_bounds(100, 20, 10)
    assert len(window_bounds(100)) == 9  # the 9 calls of RankGPT over the top 100
    assert window_bounds(50, 20, 10, start=20) == [(30, 50), (20, 40)]


@pytest.mark.parametrize("n", range(1, 64))
@pytest.mark.parametrize("window, stride", [(20, 10), (5, 2), (4, 4)])
def test_windows_cover_every_position_back_to_front(n, window, stride):
    bounds = window_bounds(n, window, stride)
    assert bounds[0][1] == n and bounds[-1][0] == 0
    assert all(0 <= lo < hi <= n and hi - lo <= window for lo, hi in bounds)
    assert set().union(*(range(lo, hi) for lo, hi in bounds)) == set(range(n))
    assert [hi for _, hi in bounds] == sorted((hi for _, hi in bounds), reverse=True)


def drive(search, best_first):
    """Answer each Rerank by sorting its rows with a fixed preference; return (final ranking, windows)."""
    preference = {doc: -rank for rank, doc in enumerate(best_first)}
    final, requests = drive_search(search, scripted_answers(preference))
    return final, [r.rows for r in requests]


def test_sliding_window_by_hand():
    ranking = list(range(30))  # first stage: worst documents first
    best_first = list(range(29, -1, -1))  # the reranker prefers higher numbers
    final, requests = drive(sliding_window(ranking, window=20, stride=10), best_first)
    # window [10, 30) sorts 10..29; window [0, 20) then sees 0..9 and the 10 best of the first window
    assert requests == [tuple(range(10, 30)), tuple(range(10)) + tuple(range(29, 19, -1))]
    assert final == list(range(29, 19, -1)) + list(range(9, -1, -1)) + list(range(19, 9, -1))
    assert final is ranking  # reranked in place


def test_best_documents_bubble_to_the_front():
    ranking = list(range(100))
    best_first = [97, 3, 55, 80, 12, 64, 41, 99, 0, 28]  # then everyone else, in a fixed order
    best_first += [d for d in range(99, -1, -1) if d not in best_first]
    final, requests = drive(sliding_window(ranking), best_first)
    assert len(requests) == 9
    assert final[:10] == best_first[:10]  # the top w - stride are exact, wherever they started
    assert sorted(final) == list(range(100))
