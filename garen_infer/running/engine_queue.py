"""One queue per engine, fed continuously: requests wait here until the engine has room, and each answer is handed
back the moment its call returns.

An engine takes up to ``lanes`` calls at once, each carrying at most ``items_per_call`` requests: a local model
(transformers, a cross-encoder, the index's embedder) has one lane and batches whatever is pending when it is free;
a server (the OpenAI-compatible backend) has one lane per request it may keep in flight, each carrying one request,
so a slot is refilled as soon as its answer returns; yes/no scores, of which the backend sends
``yes_no_per_request`` (N) in one request, go on one lane per N slots, each call carrying up to N. Engines that share one local model share one lock, so its
calls never overlap (a tokenizer or a GPU stream is not for two threads at once). Each call runs in the
``affinity`` of its first request's ``key`` (the asking query's id), which a server backend with several replicas
reads to send every request of one query to the same replica (``backends/replicas.py``).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from garen_infer.llm.backends.dispatch import yes_no_per_request
from garen_infer.llm.backends.replicas import affinity


@dataclass(frozen=True)
class Shape:
    lanes: int  # calls in flight at once
    items_per_call: int
    # calls in flight beyond which a lane waits for a full call (``items_per_call`` pending); None: never waits
    fill_after: int | None = None


def engine_shape(model, max_batch: int, call: str = "") -> Shape:
    """How a role's model is fed: a backend that declares ``requests_at_once`` (a server's slots) gets one lane per
    slot and one request per call, except yes/no scores (``call`` "score"), of which one request carries up to the
    backend's ``yes_no_per_request`` (N); any other model one lane with calls of up to ``max_batch``.

    Yes/no calls are filled: with a lane per slot each taking whatever is pending the moment it wakes, a call
    carries a score or two while the rest of a query's slate goes out on other lanes. So only the first slots /
    N calls in flight (rounded up) go with what is pending, which keeps ``slots`` prompts in the engine once
    they are full; past those a lane waits until N scores are pending. A backlog still goes out on every lane
    (full calls), where the answers' way back, not the engine, is what takes the time."""
    backend = backend_of(model)
    slots = getattr(backend, "requests_at_once", None)
    if not slots or slots <= 1:
        return Shape(1, max(max_batch, 1))
    if call != "score":
        return Shape(slots, 1)
    per_call = yes_no_per_request(backend)
    return Shape(slots, per_call, -(-slots // per_call) if per_call > 1 else None)


def backend_of(model):
    """The engine behind a role (its backend, through the response cache's wrapper), or the role itself."""
    inner = getattr(model, "backend", model)
    return getattr(inner, "backend", inner)


class EngineQueue:
    """Pending requests of one engine and the worker threads that answer them. ``call`` answers a list of payloads
    (one backend call); ``deliver(unit, answer, error)`` receives every answer, or the call's error, per unit."""

    def __init__(self, name: str, call: Callable[[list], list], shape: Shape, deliver: Callable, lock: threading.Lock | None,
                 key: Callable[[object], str | None] = lambda unit: None):
        self.name, self.call, self.shape, self.deliver, self.lock, self.key = name, call, shape, deliver, lock, key
        self.pending: deque = deque()  # (unit, payload)
        self._changed = threading.Condition()
        self._closed = False
        self._workers: list[threading.Thread] = []
        self._calling = 0  # calls in flight

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
        called = False  # whether this lane has a call behind it (in flight until it asks for the next)
        while True:
            batch = self._take(called)
            called = True
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

    def _take(self, called: bool) -> list:
        """The next call's requests, once there are any (and, past ``fill_after`` calls in flight, a full call)."""
        with self._changed:
            if called:  # this lane's call is done: a waiting lane may now go with less
                self._calling -= 1
                self._changed.notify()
            while not self._closed and not self._may_call():
                self._changed.wait()
            if self._closed:
                return []
            size = min(len(self.pending), self.shape.items_per_call)
            self._calling += 1
            if len(self.pending) > size:
                self._changed.notify()  # more for another lane
            return [self.pending.popleft() for _ in range(size)]

    def _may_call(self) -> bool:
        fill_after = self.shape.fill_after
        if fill_after is None or self._calling < fill_after:
            return bool(self.pending)
        return len(self.pending) >= self.shape.items_per_call
