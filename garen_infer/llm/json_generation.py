"""The generator in index builds (group summaries, the semantic tree).

``stage_generator`` builds the generator role from a stage's ``summarizer`` spec (None for the extractive one).
``stream_json`` asks it one prompt per item, all of them at once where the engine takes them so (``generate_json``:
the same, as a list), each answer parsed by the caller's ``parse(item, text)`` and handed back as soon as it is
final. Items whose answer does not parse, or was cut at ``max_tokens`` (JSON repair would close it and keep a summary
cut mid-sentence), are asked again with sampling (a greedy retry repeats itself, and the response cache would replay
it); items that fail every attempt come back as None, so the caller can take its explicit, counted fallback. Every
answer not used as asked is counted in ``generator.problems`` by kind, reported when the stage releases its generator
and kept in the stage's manifest."""

from __future__ import annotations

import logging
import queue
import threading
from collections import Counter, deque
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Generic, TypeVar

from tqdm.auto import tqdm

from garen_infer.llm.backends.dispatch import requests_at_once
from garen_infer.llm.ledger import answer_problems
from garen_infer.llm.permutation import answer_part
from garen_infer.llm.problems import CUT_AT_MAX_TOKENS, UNREADABLE
from garen_infer.llm.types import Chat

if TYPE_CHECKING:
    from garen_infer.llm.embedded_corpus import EmbeddedCorpus

log = logging.getLogger(__name__)


def repaired_json(text: str):
    """``text`` parsed as JSON, repaired by json_repair if need be (valid JSON parses as json.loads would); None when
    even repair fails. Small models' answers often miss a bracket or a quote. A thought (``<think>...</think>``) is
    not the answer: what follows it is read, and a thought that never closed leaves nothing."""
    import json_repair

    text, thought = answer_part(text, ranking=False)
    if thought:
        return None
    try:
        return json_repair.loads(text)
    except Exception:  # json_repair raises assorted errors on hopeless input
        return None


def stage_generator(spec: dict, corpus: EmbeddedCorpus | None, doc_texts: list[str]):
    """The generator role for an index stage's ``spec``, or None for ``{"backend": "extractive"}``. ``corpus`` is
    the index being built, seen only through its vectors (a simulated generator may correlate with them)."""
    if spec.get("backend", "extractive") == "extractive":
        return None
    from garen_infer.llm.cache import ResponseCache
    from garen_infer.llm.roles import build_roles

    return build_roles({"generator": spec}, doc_texts, corpus, ResponseCache()).generator


def release_stage_generator(generator, stage: str) -> dict:
    """Once a stage is done with its generator: the prompts the model had to cut, reported once and returned for the
    manifest, and the model freed (its GPU memory too) before the next stage loads its own."""
    if generator is None:
        return {}
    cut = generator.backend.truncated_prompts
    if cut:
        log.warning("%s: %d prompts were cut in the middle to fit the summarizer's limit; raise its max_model_len or "
                    "max_length, or show fewer words per document", stage, cut)
    problems = dict(sorted(getattr(generator, "problems", {}).items()))
    if problems:
        log.warning("%s: summarizer answers not used as asked (each asked again, then the counted fallback): "
                    "%s%s", stage,
                    ", ".join(f"{kind} {n}" for kind, n in problems.items()),
                    "; raise its sampling.max_tokens" if CUT_AT_MAX_TOKENS in problems else "")
    generator.backend.close()
    return {"truncated_prompts": cut, "answer_problems": problems}


def generate_json(generator, chats: list[Chat], parse: Callable[[int, str], object], retries: int, batch_size: int = 32,
                  what: str = "prompts", progress: bool = True) -> list:
    """Every item's parsed answer (None after ``retries`` failed attempts), in the items' order."""
    results: list = [None] * len(chats)
    with tqdm(total=len(chats), desc=what, unit="prompt", disable=not progress or len(chats) < 2) as bar:
        for i, result in stream_json(generator, len(chats), chats.__getitem__, parse, retries, batch_size):
            results[i] = result
            bar.update(1)
    return results


def stream_json(generator, count: int, prompt: Callable[[int], Chat], parse: Callable[[int, str], object], retries: int,
                batch_size: int = 32) -> Iterator[tuple[int, object]]:
    """(item, its parsed answer or None) for items ``0 .. count-1``, each as soon as it is final, its chat built by
    ``prompt(item)`` only when it is sent: a ``JsonStream`` asked every item at once."""
    stream: JsonStream[int] = JsonStream(generator, prompt, parse, retries, batch_size)
    for item in range(count):
        stream.ask(item)
    yield from stream


Item = TypeVar("Item", bound=Hashable)


class JsonStream(Generic[Item]):
    """Prompts asked while answers come back, for work whose next prompts depend on earlier answers (a tree's
    children on their parent's partition). ``ask(item)`` queues an item (hashable, asked once); iterating, once,
    gives (item, its parsed answer or None) as each is final, including items asked during the iteration, and
    ends when none is left. A server (``requests_at_once`` > 1) is given each item as soon as it is asked, every
    item in flight with its own retries, so no item waits for a slower one; a local engine takes the waiting
    items in the order asked, ``batch_size`` at a time. Each chat is built by ``prompt(item)`` when it is sent."""

    def __init__(self, generator, prompt: Callable[[Item], Chat], parse: Callable[[Item, str], object],
                 retries: int, batch_size: int = 32):
        self.generator, self.prompt, self.parse, self.retries = generator, prompt, parse, retries
        self.batch_size = max(batch_size, 1)
        slots = requests_at_once(generator.backend)
        self._pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="stream") if slots > 1 else None
        self._waiting: deque[Item] = deque()  # a local engine's items not sent yet
        self._flying: dict[Future, Item] = {}  # a server's items on their way
        self._landed: queue.SimpleQueue[Future] = queue.SimpleQueue()  # ... and those answered, in arrival order

    def ask(self, item: Item) -> None:
        if self._pool is None:
            self._waiting.append(item)
        else:
            future = self._pool.submit(self._answer, item)
            self._flying[future] = item
            future.add_done_callback(self._landed.put)

    def _answer(self, item: Item) -> object:
        return _answered(self.generator, {item: self.prompt(item)}, self.parse, self.retries)[item]

    def __iter__(self) -> Iterator[tuple[Item, object]]:
        try:
            while self._waiting or self._flying:
                if self._pool is None:
                    batch = [self._waiting.popleft() for _ in range(min(self.batch_size, len(self._waiting)))]
                    results = _answered(self.generator, {i: self.prompt(i) for i in batch}, self.parse, self.retries)
                    yield from ((i, results[i]) for i in batch)
                    continue
                future = self._landed.get()
                yield self._flying.pop(future), future.result()
        finally:
            if self._pool is not None:  # a failure stops what is not sent; what is in flight is cached
                self._pool.shutdown(wait=True, cancel_futures=True)


def _answered(generator, chats: dict, parse, retries: int) -> dict:
    """Each item's parsed answer: the greedy attempt, then sampled ones for the items that did not parse."""
    results: dict = dict.fromkeys(chats)
    counts = getattr(generator, "problems", Counter())  # LLMGenerator's, reported when the stage releases it
    pending = list(chats)
    for attempt in range(retries + 1):
        if not pending:
            break
        completions = generator.backend.generate([chats[i] for i in pending], _sampling(generator, attempt))
        for i, completion in zip(pending, completions):
            results[i] = _read(completion, partial(parse, i), counts)
        pending = [i for i in pending if results[i] is None]
    return results


def _sampling(generator, attempt: int):
    """Greedy first; a retry samples (a greedy retry repeats itself, and the cache would replay it)."""
    return generator.sampling if attempt == 0 else replace(generator.sampling, temperature=0.7, seed=attempt)


_counting = threading.Lock()  # streamed items are read on several threads


def _read(completion, parse: Callable[[str], object], problems) -> object:
    """The parsed answer, or None when it does not parse or was cut at max_tokens; its problems are counted."""
    kinds = answer_problems(completion)
    parsed = None if CUT_AT_MAX_TOKENS in kinds else parse(completion.text)
    if parsed is None and CUT_AT_MAX_TOKENS not in kinds:
        kinds.append(UNREADABLE)
    with _counting:
        problems.update(kinds)
    return parsed
