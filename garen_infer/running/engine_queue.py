"""One queue per engine, fed continuously: requests wait here until the engine has room, and each answer is handed
back the moment its call returns.

An engine takes up to ``lanes`` calls at once, each carrying at most ``items_per_call`` requests: a local model
(transformers, a cross-encoder, the index's embedder) has one lane and batches whatever is pending when it is free;
a server (the OpenAI-compatible backend) has one lane per request it may keep in flight, each carrying one request
(or, for yes/no scores, as many as the backend sends in one: ``yes_no_per_request``), so a slot is refilled as
soon as its answer returns. Engines that share one local model share one lock, so its
calls never overlap (a tokenizer or a GPU stream is not for two threads at once). Each call runs in the
``affinity`` of its first request's ``key`` (the asking query's id), which a server backend with several replicas
reads to send every request of one query to the same replica (``backends/replicas.py``).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from garen_infer.llm.backends.dispatch import yes_no_per_request
from garen_infer.llm.backends.replicas import affinity


@dataclass(frozen=True)
class Shape:
    lanes: int  # calls in flight at once
    items_per_call: int


def engine_shape(model, max_batch: int, call: str = "") -> Shape:
    """How a role's model is fed: a backend that declares ``requests_at_once`` (a server's slots) gets one lane per
    slot and one request per call, except yes/no scores (``call`` "score"), of which one request carries the
    backend's ``yes_no_per_request``; any other model one lane with calls of up to ``max_batch``."""
    backend = backend_of(model)
    slots = getattr(backend, "requests_at_once", None)
    if not slots or slots <= 1:
        return Shape(1, max(max_batch, 1))
    return Shape(slots, yes_no_per_request(backend) if call == "score" else 1)


def backend_of(model):
    """The engine behind a role (its backend, through the response cache's wrapper), or the role itself."""
    inner = getattr(model, "backend", model)
    return getattr(inner, "backend", inner)


class EngineQueue:
    """Pending requests of one engine and the worker threads that answer them. ``call`` answers a list of payloads
    (one backend call); ``deliver(unit, answer, error)`` receives every answer, or the call's error, per unit."""

    def __init__(self, name: str, call: Callable[[list], list], shape: Shape, deliver: Callable,
                 lock: threading.Lock | None,
                 key: Callable[[Any], str | None] = lambda unit: None):
        self.name, self.call, self.shape, self.deliver, self.lock, self.key = name, call, shape, deliver, lock, key
        self.pending: deque = deque()  # (unit, payload)
        self._changed = threading.Condition()
        self._closed = False
        self._workers: list[threading.Thread] = []

    def put(self, unit, payload) -> None:
        with self._changed:
            self.pending.append((unit, payload))
            if len(self._workers) < self.shape.lanes:  # lanes start on demand: an unused engine costs no thread
                worker = threading.Thread(target=self._work, name=f"engine-{self.name}", daemon=True)
                self._workers.append(worker)
                worker.start()
            self._changed.notify()

    def close(self) -> None:
        """Stop taking work: idle lanes end now, busy ones after their call (its answers are still cached)."""
        with self._changed:
            self._closed = True
            self.pending.clear()
            self._changed.notify_all()

    def _work(self) -> None:
        while True:
            batch = self._take()
            if not batch:
                return
            units, payloads = zip(*batch)
            try:
                with affinity(self.key(units[0])):
                    if self.lock is not None:
                        with self.lock:
                            answers = self.call(list(payloads))
                    else:
                        answers = self.call(list(payloads))
            except BaseException as err:  # handed to the scheduler, which raises it in its own thread
                for unit in units:
                    self.deliver(unit, None, err)
                continue
            for unit, answer in zip(units, answers):
                self.deliver(unit, answer, None)

    def _take(self) -> list:
        with self._changed:
            while not self.pending and not self._closed:
                self._changed.wait()
            if self._closed:
                return []
            size = min(len(self.pending), self.shape.items_per_call)
            return [self.pending.popleft() for _ in range(size)]
