"""Which server answers: several replicas of one model behind the OpenAI-compatible backend (several ``vllm serve``,
or the front ends of a data-parallel deployment), balanced on the client.

Each request goes to the replica with the fewest requests in flight, up to ``concurrency`` each, so a slow replica
is given less and a fast one more. A replica whose request failed (refused connection, timeout, 5xx) is set aside
for a cool-down that doubles with each failure in a row (``backoff`` up to ``max_backoff``), while the others take
its share; after the cool-down it is tried again, and one answer puts it back in full. A request that failed on one
replica is retried at once on another; only when every replica has failed it does it wait. Which replica answered
is nowhere in a ledger, a cache key or a run folder: replicas serve the same model, so the answer is the same.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass


@dataclass(eq=False)
class Replica:
    base_url: str
    in_flight: int = 0
    sent: int = 0  # requests given to it so far; breaks ties between equally busy replicas
    failures: int = 0  # failed requests in a row
    resting_until: float = 0.0  # time.monotonic() before which it is only used when no other replica is up


class ReplicaPool:
    def __init__(self, base_urls: list[str], concurrency: int, backoff: float, max_backoff: float):
        self.replicas = [Replica(url) for url in base_urls]
        self.concurrency, self.backoff, self.max_backoff = max(concurrency, 1), backoff, max_backoff
        self._changed = threading.Condition()

    @property
    def capacity(self) -> int:
        """Requests in flight at once across the replicas."""
        return self.concurrency * len(self.replicas)

    def acquire(self, tried: set | frozenset = frozenset()) -> Replica:
        """A replica with a free slot, waiting for one if need be: among the replicas that are up (all of them
        when none is), those this request has not ``tried`` yet first, then the least busy."""
        with self._changed:
            while True:
                now = time.monotonic()
                up = [r for r in self.replicas if r.resting_until <= now] or self.replicas
                fresh = [r for r in up if r not in tried] or up
                free = [r for r in fresh if r.in_flight < self.concurrency]
                if free:
                    replica = min(free, key=lambda r: (r.in_flight, r.sent))
                    replica.in_flight += 1
                    replica.sent += 1
                    return replica
                resting = [r.resting_until - now for r in self.replicas if r.resting_until > now]
                self._changed.wait(timeout=min([0.5, *resting]))  # a slot frees, or a replica's rest ends

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
