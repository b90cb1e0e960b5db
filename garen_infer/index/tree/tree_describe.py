"""Internal-node descriptions of the semantic tree: extractive (the CPU default, no instruction-following model
ships on PyPI) or written by the generator from the node's members (LATTICE App. D); a generator answer that is
not valid JSON after the retries falls back to the extractive description and is counted, as the groups stage
does with its summaries."""

from __future__ import annotations

import logging

from garen_infer.index.grouping.summaries import ExtractiveSummarizer, group_text, parse_summary
from garen_infer.llm.json_generation import generate_json

log = logging.getLogger(__name__)


class NodeDescriber:
    def __init__(self, doc_texts: list[str], doc_vectors, generator=None, retries: int = 2,
                 batch_size: int = 32, max_words: int = 150):
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
            answers = generate_json(self.generator, chats, lambda _, text: parse_summary(text), self.retries,
                                    self.batch_size, "node descriptions")
        out = []
        for (rows, _), answer in zip(nodes, answers):
            source = self.name
            if answer is None:
                if self.generator is not None:
                    self.fallbacks += 1
                    log.warning("a tree node got no valid JSON description after %d retries; using the "
                                "extractive one", self.retries)
                answer, source = self.extractive.summarize(rows), "extractive"
            out.append((group_text(answer["concept"], answer["summary"]), source))
        return out
