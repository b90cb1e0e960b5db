"""Hop distance on a graph given by its neighbours: how many edges separate a set of start nodes from the nearest
of a set of targets (GAREN App. C.1 Fig. 8 counts them on the k-NN document graph and on the group graph)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

MAX_HOPS = 10  # farther than this is reported as None


def hop_distance(start: set[int], targets: set[int], neighbours: Callable[[int], Iterable[int]]) -> int | None:
    """The fewest edges from any node of ``start`` to any of ``targets`` (breadth-first); 0 when they share a
    node, None when none is within ``MAX_HOPS``."""
    if start & targets:
        return 0
    seen, frontier = set(start), deque((s, 0) for s in start)
    while frontier:
        node, hops = frontier.popleft()
        if hops >= MAX_HOPS:
            continue
        for nxt in neighbours(node):
            if nxt in seen:
                continue
            if nxt in targets:
                return hops + 1
            seen.add(nxt)
            frontier.append((nxt, hops + 1))
    return None
