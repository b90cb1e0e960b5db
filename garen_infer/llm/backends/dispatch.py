"""How a list of requests reaches an engine, with each answer handed back as it arrives.

A server (a backend that declares ``requests_at_once``: the OpenAI-compatible backend's slots over its replicas)
is sent one request per call, ``requests_at_once`` of them in flight, and a slot is refilled as soon as its answer
returns: no request waits for a slower one. Yes/no prompts go ``yes_no_per_request`` to a call where the backend
declares it (the OpenAI-compatible backend's prompt lists): one request then carries several, and its answers
arrive together. A local engine (transformers, a cross-encoder) is called with one of its
own batches (``batch_size``) at a time. Either way the caller (the response cache's wrapper) stores each answer as
it arrives, so a failure loses only the answers not yet given.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from garen_infer.llm.backends.replicas import carrying_affinity
from garen_infer.llm.types import Completion


def requests_at_once(backend) -> int:
    """Requests the backend answers concurrently (1: one call at a time)."""
    return max(int(getattr(backend, "requests_at_once", 1) or 1), 1)


def yes_no_per_request(backend) -> int:
    """Yes/no prompts the backend sends in one request (1: one each)."""
    return max(int(getattr(backend, "yes_no_per_request", 1) or 1), 1)


def as_answered(
    backend, call: Callable[[list], list[Completion]], requests: list, per_call: int = 1
) -> Iterator[tuple[int, Completion]]:
    """(position in ``requests``, its answer) for every request, in the order they are answered; each answer's
    ``seconds`` is its own time (a server's) or its share of its batch's (a server's call of ``per_call``
    requests, a local engine's batch). When a call fails, the answers already on their way are still given, then
    the first failure is raised."""
    slots = requests_at_once(backend)
    if slots > 1 and len(requests) > 1:
        yield from _in_flight(call, requests, slots, max(per_call, 1))
        return
    size = getattr(backend, "batch_size", None) or len(requests) or 1
    for start in range(0, len(requests), size):
        begun = time.perf_counter()
        answers = call(requests[start : start + size])
        share = (time.perf_counter() - begun) / max(len(answers), 1)
        for offset, answer in enumerate(answers):
            answer.seconds = share
            yield start + offset, answer


def _in_flight(call, requests: list, slots: int, per_call: int) -> Iterator[tuple[int, Completion]]:
    def one(start: int) -> list[tuple[int, Completion]]:
        begun = time.perf_counter()
        answers = call(requests[start : start + per_call])
        share = (time.perf_counter() - begun) / max(len(answers), 1)
        for answer in answers:
            answer.seconds = share
        return list(enumerate(answers, start))

    starts, one = range(0, len(requests), per_call), carrying_affinity(one)
    pool = ThreadPoolExecutor(max_workers=min(slots, len(starts)), thread_name_prefix="in-flight")
    waiting = {pool.submit(one, start) for start in starts}  # the pool keeps ``slots`` running
    failure = None
    try:
        while waiting:
            done, waiting = wait(waiting, return_when=FIRST_COMPLETED)
            for future in done:
                if future.cancelled():
                    continue
                if future.exception() is not None:
                    if failure is None:
                        failure = future.exception()
                        for queued in waiting:
                            queued.cancel()  # those not started yet; the ones in flight finish and are given
                    continue
                yield from future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    if failure is not None:
        raise failure
