"""Which server answers: several replicas of one model behind the OpenAI-compatible backend (several ``vllm serve``,
or the front ends of a data-parallel deployment), balanced on the client.

A request that names a query (``affinity``: the scheduler sets the asking query's id around each engine call)
goes to that query's home replica, chosen by rendezvous hashing of the id over the replicas' URLs, so every
window, score and agent turn of one query meets the prefix cache its earlier requests filled there. Adding or
losing a replica moves only the queries whose home it was. Only when the home replica is saturated (``concurrency``
requests in flight), resting after a failure, or has already failed this request does the request fall back to the
least busy replica. A request without a query (an index stage's prompts, which share no prefix) goes to the least
busy replica at once.

Least busy: the replica with the fewest requests in flight, up to ``concurrency`` each, so a slow replica is given
less and a fast one more. A replica whose request failed (refused connection, timeout, 5xx) is set aside for a
cool-down that doubles with each failure in a row (``backoff`` up to ``max_backoff``), while the others take its
share; after the cool-down it is tried again, and one answer puts it back in full. A request that failed on one
replica is retried at once on another; only when every replica has failed it does it wait. Which replica answered
is nowhere in a ledger, a cache key or a run folder: replicas serve the same model, so the answer is the same.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

_AFFINITY: ContextVar[str | None] = ContextVar("replica_affinity", default=None)
T = TypeVar("T")


@contextmanager
def affinity(key: str | None) -> Iterator[None]:
    """Requests sent in this block (in this thread) belong to ``key``: one query, or one agent episode."""
    token = _AFFINITY.set(key)
    try:
        yield
    finally:
        _AFFINITY.reset(token)


def current_affinity() -> str | None:
    return _AFFINITY.get()


def carrying_affinity(call: Callable[..., T]) -> Callable[..., T]:
    """``call`` as the caller's worker threads run it: in the caller's affinity (a thread pool starts its threads
    with none)."""
    key = _AFFINITY.get()

    def run(*args, **kwargs) -> T:
        with affinity(key):
            return call(*args, **kwargs)

    return run


@dataclass(eq=False)
class Replica:
    base_url: str
    in_flight: int = 0
    sent: int = 0  # requests given to it so far; breaks ties between equally busy replicas
    failures: int = 0  # failed requests in a row
    resting_until: float = 0.0  # time.monotonic() before which it is only used when no other replica is up


@dataclass
class AffinityCounts:
    """Requests that named a query: sent to its home replica, or elsewhere because the home was saturated,
    resting, or had failed this request."""

    home: int = 0
    saturated: int = 0
    failing: int = 0


class ReplicaPool:
    def __init__(self, base_urls: list[str], concurrency: int, backoff: float, max_backoff: float):
        self.replicas = [Replica(url) for url in base_urls]
        self.concurrency, self.backoff, self.max_backoff = max(concurrency, 1), backoff, max_backoff
        self.affinity = AffinityCounts()
        self._changed = threading.Condition()

    @property
    def capacity(self) -> int:
        """Requests in flight at once across the replicas."""
        return self.concurrency * len(self.replicas)

    def home(self, key: str) -> Replica:
        """The replica ``key`` belongs to: the highest hash of (key, URL), the same in every process."""
        return max(self.replicas, key=lambda r: hashlib.sha256(f"{key}\0{r.base_url}".encode()).digest())

    def acquire(self, tried: set | frozenset = frozenset()) -> Replica:
        """A replica with a free slot, waiting for one if need be: the request's home replica where it names a
        query and that replica is free, up and not ``tried``; else, among the replicas that are up (all of them
        when none is), those this request has not tried yet first, then the least busy."""
        key = _AFFINITY.get() if len(self.replicas) > 1 else None
        with self._changed:
            home = self._home_if_free(key, tried) if key is not None else None
            if home is not None:
                return self._take(home)
            while True:
                now = time.monotonic()
                up = [r for r in self.replicas if r.resting_until <= now] or self.replicas
                fresh = [r for r in up if r not in tried] or up
                free = [r for r in fresh if r.in_flight < self.concurrency]
                if free:
                    return self._take(min(free, key=lambda r: (r.in_flight, r.sent)))
                resting = [r.resting_until - now for r in self.replicas if r.resting_until > now]
                self._changed.wait(timeout=min([0.5, *resting]))  # a slot frees, or a replica's rest ends

    def _home_if_free(self, key: str, tried) -> Replica | None:
        home = self.home(key)
        if home in tried or home.resting_until > time.monotonic():
            self.affinity.failing += 1
            return None
        if home.in_flight >= self.concurrency:
            self.affinity.saturated += 1
            return None
        self.affinity.home += 1
        return home

    def _take(self, replica: Replica) -> Replica:
        replica.in_flight += 1
        replica.sent += 1
        return replica

    def release(self, replica: Replica, failed: bool) -> None:
        """``failed``: it did not answer (unreachable, timed out, overloaded), not a refusal of the request itself."""
        with self._changed:
            replica.in_flight -= 1
            if not failed:
                replica.failures, replica.resting_until = 0, 0.0
            else:
                replica.failures += 1
                rest = min(self.backoff * 2 ** (replica.failures - 1), self.max_backoff)
                replica.resting_until = time.monotonic() + rest
            self._changed.notify_all()
