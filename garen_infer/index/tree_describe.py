"""What the semantic tree's builders ask of a generator, and what they do when it fails.

- ``generate_json``: one prompt per item, each answer parsed by ``parse(item, text)``; items whose answer does not parse
  are asked again with sampling (a greedy retry repeats itself, and the response cache would replay it); items
  that fail every attempt come back as None, for the caller's explicit fallback.
- ``NodeDescriber``: internal-node descriptions, extractive (the CPU default, no instruction-following model ships
  on PyPI) or written by the generator from the node's members; a generator failure falls back to the extractive
  description and is counted, as the groups stage does with its summaries.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Callable

from tqdm.auto import tqdm

from garen_infer.index.summaries import ExtractiveSummarizer, group_text, parse_summary
from garen_infer.llm.types import Chat

log = logging.getLogger(__name__)


def make_generator(spec: dict, folder, doc_texts: list[str]):
    """The generator role for an index stage, or None for ``{"backend": "extractive"}``."""
    if spec.get("backend", "extractive") == "extractive":
        return None
    from garen_infer.llm.cache import ResponseCache
    from garen_infer.llm.roles import build_roles

    return build_roles({"generator": spec}, doc_texts, folder, ResponseCache()).generator


def generate_json(generator, chats: list[Chat], parse: Callable[[int, str], object], retries: int, batch_size: int = 32, what: str = "prompts") -> list:
    results: list = [None] * len(chats)
    with tqdm(total=len(chats), desc=what, unit="prompt", disable=len(chats) < 2) as bar:
        for start in range(0, len(chats), batch_size):
            pending = list(range(start, min(start + batch_size, len(chats))))
            for attempt in range(retries + 1):
                if not pending:
                    break
                sampling = generator.sampling if attempt == 0 else replace(generator.sampling, temperature=0.7, seed=attempt)
                completions = generator.backend.generate([chats[i] for i in pending], sampling)
                for i, completion in zip(pending, completions):
                    results[i] = parse(i, completion.text)
                pending = [i for i in pending if results[i] is None]
            bar.update(min(batch_size, len(chats) - start))
    return results


class NodeDescriber:
    def __init__(self, doc_texts: list[str], doc_vectors, generator=None, retries: int = 2, batch_size: int = 32, max_words: int = 150):
        self.extractive = ExtractiveSummarizer(doc_texts, doc_vectors)
        self.generator, self.retries, self.batch_size, self.max_words = generator, retries, batch_size, max_words
        self.fallbacks = 0

    @property
    def name(self) -> str:
        return self.generator.name if self.generator is not None else "extractive"

    def describe(self, nodes: list[tuple[list[int], list[str]]]) -> list[tuple[str, str]]:
        """(description, source) for each node, given (its documents, its members' texts)."""
        from garen_infer.llm.prompts import lattice_node_summary

        answers: list = [None] * len(nodes)
        if self.generator is not None and nodes:
            chats = [lattice_node_summary(members, self.max_words) for _, members in nodes]
            answers = generate_json(self.generator, chats, lambda _, text: parse_summary(text), self.retries, self.batch_size, "node descriptions")
        out = []
        for (rows, _), answer in zip(nodes, answers):
            source = self.name
            if answer is None:
                if self.generator is not None:
                    self.fallbacks += 1
                    log.warning("a tree node got no valid JSON description after %d retries; using the extractive one", self.retries)
                answer, source = self.extractive.summarize(rows), "extractive"
            out.append((group_text(answer["concept"], answer["summary"]), source))
        return out
