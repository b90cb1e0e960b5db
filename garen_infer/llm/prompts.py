"""Every prompt the toolkit sends, as data, each with its source. No random text (it would defeat the cache).

Listwise reranker prompts take ``docs`` as (1-based id, passage) pairs; passages are whitespace-truncated to
``max_words`` and any "[n]" inside them is rewritten to "(n)" so it cannot be mistaken for an id (rank_llm).
"""

from __future__ import annotations

import re

from garen_infer.llm.types import Chat

MAX_PASSAGE_WORDS = 300  # rank_llm default (anchors.md sec. 6)

_BRACKETED_NUMBER = re.compile(r"\[(\d+)\]")


def passage(text: str, max_words: int = MAX_PASSAGE_WORDS) -> str:
    words = text.split()
    return _BRACKETED_NUMBER.sub(r"(\1)", " ".join(words[:max_words]))


# ---- RankGPT (Sun et al., 2023) as in rank_llm: a multi-turn conversation, one turn per passage ----------------
def rankgpt(query: str, docs: list[str], max_words: int = MAX_PASSAGE_WORDS) -> Chat:
    n = len(docs)
    chat: Chat = [
        {"role": "system", "content": "You are RankGPT, an intelligent assistant that can rank passages based on their relevancy to the query."},
        {"role": "user", "content": f"I will provide you with {n} passages, each indicated by number identifier []. \nRank the passages based on their relevance to query: {query}."},
        {"role": "assistant", "content": "Okay, please provide the passages."},
    ]
    for i, doc in enumerate(docs, start=1):
        chat.append({"role": "user", "content": f"[{i}] {passage(doc, max_words)}"})
        chat.append({"role": "assistant", "content": f"Received passage [{i}]."})
    chat.append({"role": "user", "content": (
        f"Search Query: {query}. \nRank the {n} passages above based on their relevance to the search query. "
        "The passages should be listed in descending order using identifiers. The most relevant passages should be "
        "listed first. The output format should be [] > [], e.g., [1] > [2]. Only response the ranking results, "
        "do not say any word or explain."
    )})
    return chat


def _numbered(docs: list[str], max_words: int) -> str:
    return "\n".join(f"[{i}] {passage(doc, max_words)}" for i, doc in enumerate(docs, start=1))


# ---- GAREN App. G, Table 10: the two reranker prompts -------------------------------------------------------
GAREN_NON_REASONING_SYSTEM = "You are RankLLM, an intelligent assistant that can rank documents based on their relevancy to the query."


def garen_non_reasoning(query: str, docs: list[str], max_words: int = MAX_PASSAGE_WORDS) -> Chat:
    user = (
        "I will provide you with passages, each indicated by number identifier []. Rank the passages based on their "
        f"relevance to the search query.\n{_numbered(docs, max_words)}\nSearch Query: {query}.\nRank the {len(docs)} "
        "passages above based on their relevance to the search query. The passages should be listed in descending "
        "order using identifiers. The most relevant passages should be listed first. The output format should be "
        "<answer> [] > [] </answer>, e.g., <answer> [1] > [2] </answer>."
    )
    return [{"role": "system", "content": GAREN_NON_REASONING_SYSTEM}, {"role": "user", "content": user}]


GAREN_REASONING_SYSTEM = (
    "You are an AI assistant that analyzes complex questions and identifies which documents best support answering "
    "them. Given a user's query and a set of documents, your task is to: 1. Generate a reasoning trace, thinking step "
    "by step about what knowledge or types of information are necessary to answer the query. These should be "
    "abstract but specific enough to guide document selection. 2. Select and rank at least 10 documents that best "
    "support the reasoning steps. Consider how each document contributes to the reasoning process. Order them from "
    "most to least useful using > between document IDs (e.g., [3] > [7]). Use the following format: [Reasoning Trace] "
    "Step 1: <First reasoning step> Step 2: <Second reasoning step> ... Step N: <Final reasoning step> "
    "[Document Ranking] [9] > [5] > [6] > ... > [12] Only produce the output in the format shown above."
)


def garen_reasoning(query: str, docs: list[str], max_words: int = MAX_PASSAGE_WORDS) -> Chat:
    user = f"[Query] {query}\n[Documents]\n{_numbered(docs, max_words)}"
    return [{"role": "system", "content": GAREN_REASONING_SYSTEM}, {"role": "user", "content": user}]


LISTWISE_PROMPTS = {"rankgpt": rankgpt, "garen": garen_non_reasoning, "garen-reasoning": garen_reasoning}

# ---- Pointwise yes/no: the Qwen3-Reranker format (GAREN App. G Table 10 navigator; anchors.md sec. 7) ----------
YES_NO_SYSTEM = (
    'Judge whether the Document meets the requirements based on the Query and the Instruct provided. '
    'Note that the answer can only be "yes" or "no".'
)
DEFAULT_INSTRUCTION = "Given a query, retrieve relevant passages that answer the query"  # GAREN Table 10
# Qwen3-Reranker answers after an empty think block; the assistant turn is opened with it.
QWEN3_ASSISTANT_PREFIX = "<think>\n\n</think>\n\n"


def yes_no(query: str, document: str, instruction: str = DEFAULT_INSTRUCTION) -> Chat:
    user = f"<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}"
    return [{"role": "system", "content": YES_NO_SYSTEM}, {"role": "user", "content": user}]


# ---- GAREN App. G Table 11: the group summarizer -------------------------------------------------------------
SUMMARIZER_SYSTEM = "You are an expert AI analyst and summarizer. Output valid JSON only --- no markdown, no prose outside the JSON."

SUMMARIZER_USER = """You are an expert AI analyst and summarizer. Your mission is to create a highly informative and "discriminative signpost" for a navigating search agent. This signpost (a summary) must guide the agent to the correct cluster of nodes to answer a user's query.

You will follow a strict, step-by-step cognitive process. You must analyze the children nodes in a target parent node (the "Positive Set").

## INPUTS

### POSITIVE SET: Information about the target parent node to be summarized
The following {n} documents belong to the same community detected from a corpus graph.

{docs}

## YOUR TASK & OUTPUT FORMAT

Your entire output must be a single, valid JSON object. Inside this JSON you will follow the 3-step thinking process outlined below, populating each field as instructed.

### JSON Structure and Instructions:

{{
"detailed_fingerprints": [
// For EACH document in the POSITIVE SET (target parent node),
// extract a structured object of its key, queryable facts.
{{
"one_line_summary": "...", // very information-dense, concise one-line summary
"key_entities": ["..."], // a few key entities central to this document
"genre_or_category": ["..."], // a few key genres / categories
"name": "..." // name the document
}}
],
"common_theme": "...",
// Reason deeply about the common themes between the documents
// in the POSITIVE SET. Focus on the majority theme; do not force
// outlier items into it.
"concept": "...",
// A 1--5 word label naming this community
// (e.g., "Blue-eyed cats", "Structural coloration",
// "HF radio communication").
"summary": "..."
// Based on step 1 and step 2, write a very information-dense
// description of this community. Make sure to include all key
// entities from the majority theme. This summary must be
// discriminative enough for a search agent to decide whether
// to explore this community. Aim for 4--8 sentences covering
// the core topic plus all notable entities.
}}

## IMPORTANT GUIDELINES
- The summary MUST include the specific entities extracted in step 1 (key_entities). Avoid vague labels like "Various topics" or "Miscellaneous".
- Focus on the majority theme. If some documents do not align with the main theme, down-weight them rather than forcing them into the summary.
- The "concept" is a short label; the "summary" is the detailed description.
- Output JSON only --- no markdown code fences, no explanation text.

Your Response (JSON only):"""


def summarizer(docs: list[str], max_words: int = MAX_PASSAGE_WORDS) -> Chat:
    body = "\n\n".join(f"[{i}] {passage(d, max_words)}" for i, d in enumerate(docs, start=1))
    return [{"role": "system", "content": SUMMARIZER_SYSTEM}, {"role": "user", "content": SUMMARIZER_USER.format(n=len(docs), docs=body)}]
