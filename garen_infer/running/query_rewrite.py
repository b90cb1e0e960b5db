"""A first stage that searches with a reasoning query the generator role writes live (``first_stage.query:
rewrite``), beside BRIGHT's published GPT-4 reasoning queries (``bright:gpt4``, data/query_texts.py).

    for each query, as the scheduler runs it:
        text = generator(reasoning-query prompt, query)   # one Generate, cached, ledger role query_writer
        first_stage = top depth of the index for text     # BM25 or dense, excluded ids dropped
        the method searches from that pool                # reading the original query (models_read)

The prompt asks for what BRIGHT's reasoning queries hold (the essential problem, step-by-step reasoning
about what relevant documents contain, a draft answer), in our words. An answer with nothing usable (empty,
only a thought, no word at all, or words no document holds, so the first stage finds nothing) is counted
``unreadable`` under ``query_writer``; the first stage then searches with the original query.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from garen_infer.index.first_stage import FirstStageConfig, excluded_rows, first_stage_scored
from garen_infer.llm.problems import UNREADABLE
from garen_infer.llm.requests import Generate
from garen_infer.llm.types import Chat
from garen_infer.methods.base import QueryState, Search

QUERY_WRITER = "query_writer"  # the ledger role its answers are counted under

REASONING_QUERY_PROMPT = """{query}

Your text will be the search query for documents that help answer the post above. Write:
1. the essential problem the post poses;
2. your step-by-step reasoning about what a relevant document must contain (concepts, methods, facts);
3. a draft answer."""


def reasoning_query_chat(query: str) -> Chat:
    return [{"role": "user", "content": REASONING_QUERY_PROMPT.format(query=query)}]


def read_rewrite(answer: str) -> str | None:
    """The query text in an answer: what follows the last closed thought; None when no word is left."""
    text = answer.rsplit("</think>", 1)[1] if "</think>" in answer else answer
    text = text.strip()
    return None if text.startswith("<think>") or not any(char.isalnum() for char in text) else text


def rewrite_then_search(search: Callable[[QueryState], Search], index, stage: FirstStageConfig, dataset,
                        keeps_excluded: bool) -> Callable[[QueryState], Search]:
    """``search`` preceded, for a state whose first stage has not run, by the rewrite and the first stage."""

    def start(state: QueryState) -> Search:
        if state.first_stage_text is None:
            (answer,) = yield Generate((reasoning_query_chat(state.query.text),), role=QUERY_WRITER)
            exclude = None if keeps_excluded else [excluded_rows(state.query, dataset.doc_index)]
            text = read_rewrite(answer)
            hits = first_stage_scored(index, [text], stage, exclude)[0] if text is not None else []
            if not hits:  # nothing usable, or words no document holds (garbage): the original query searches
                state.answer_problems.append((QUERY_WRITER, UNREADABLE))
                text = state.query.text
                hits = first_stage_scored(index, [text], stage, exclude)[0]
            state.first_stage[:] = [row for row, _ in hits]
            state.first_stage_scores = dict(hits)
            assert text is not None  # hits come from a text
            state.first_stage_text = text
            state.trace["first_stage_query"] = text
            if stage.models_read == "rewritten":
                state.query = replace(state.query, text=text)
        return (yield from search(state))

    return start
