"""Every prompt the toolkit sends, as data, each with its source. No random text (it would defeat the cache).

Listwise reranker prompts take ``docs`` as (1-based id, passage) pairs; passages are whitespace-truncated to
``max_words`` and any "[n]" inside them is rewritten to "(n)" so it cannot be mistaken for an id (rank_llm).
"""

from __future__ import annotations

import re

from garen_infer.errors import GarenError
from garen_infer.llm.rgs_prompt import parse_all_or_identity, rgs_author
from garen_infer.llm.types import Chat

MAX_PASSAGE_WORDS = 300  # rank_llm default (anchors.md sec. 6)

_BRACKETED_NUMBER = re.compile(r"\[(\d+)\]")


def passage(text: str, max_words: int | None = MAX_PASSAGE_WORDS) -> str:
    words = text.split()
    return _BRACKETED_NUMBER.sub(r"(\1)", " ".join(words[:max_words]))


# ---- RankGPT (Sun et al., 2023) as in rank_llm: a multi-turn conversation, one turn per passage ----------------
def rankgpt(query: str, docs: list[str], max_words: int = MAX_PASSAGE_WORDS, text: str = "paper", task: str = "") -> Chat:
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


# ---- GAREN App. G (Tables 10 and 11), word for word ----------------------------------------------------------
# The templates below are the paper's text byte for byte (tests/test_prompts_paper.py checks them against
# garen-paper.txt and a pinned hash). The paper prints the reranker and navigator prompts as table rows, with a
# space where a layout would break the line, and typesets quotes (‘‘yes’’, user’s). ``text`` picks the reading:
# - "paper": exactly that text;
# - "plain": the same words laid out as the reference implementations send them (rank_llm's line per part for
#   the RankLLM prompt, Qwen3-Reranker's "<Instruct>: ...\n<Query>: ...\n<Document>: ...") with ASCII quotes, as
#   the authors' code most likely had before LaTeX typeset it.
PROMPT_TEXTS = ("paper", "plain")

GAREN_REASONING_SYSTEM = 'You are an AI assistant that analyzes complex questions and identifies which documents best support answering them. Given a user’s query and a set of documents, your task is to: 1. Generate a reasoning trace, thinking step by step about what knowledge or types of information are necessary to answer the query. These should be abstract but specific enough to guide document selection. 2. Select and rank at least 10 documents that best support the reasoning steps. Consider how each document contributes to the reasoning process. Order them from most to least useful using > between document IDs (e.g., [3] > [7]). Use the following format: [Reasoning Trace] Step 1: <First reasoning step> Step 2: <Second reasoning step> ... Step N: <Final reasoning step> [Document Ranking] [9] > [5] > [6] > ... > [12] Only produce the output in the format shown above.'
GAREN_REASONING_USER = "[Query] {query} [Documents] {docs}"
GAREN_NON_REASONING_SYSTEM = "You are RankLLM, an intelligent assistant that can rank documents based on their relevancy to the query."
GAREN_NON_REASONING_USER = 'I will provide you with passages, each indicated by number identifier []. Rank the passages based on their relevance to the search query. {docs} Search Query: {query}. Rank the {n_docs} passages above based on their relevance to the search query. The passages should be listed in descending order using identifiers. The most relevant passages should be listed first. The output format should be <answer> [] > [] </answer>, e.g., <answer> [1] > [2] </answer>.'
NAVIGATOR_SYSTEM = 'Judge whether the Document meets the requirements based on the Query and the Instruct provided. Note that the answer can only be ‘‘yes’’ or ‘‘no’’.'
NAVIGATOR_USER = '<Instruct>: Given a query, retrieve relevant passages that answer the query. <Query>: {query} <Document>: {doc}'
SUMMARIZER_SYSTEM = "You are an expert AI analyst and summarizer. Output valid JSON only --- no markdown, no prose outside the JSON."
SUMMARIZER_USER = """You are an expert AI analyst and summarizer. Your mission is to create a highly informative and ‘‘discriminative signpost’’ for a navigating search agent. This signpost (a summary) must guide the agent to the correct cluster of nodes to answer a user’s query.

You will follow a strict, step-by-step cognitive process. You must analyze the children nodes in a target parent node (the ‘‘Positive Set’’).

## INPUTS

### POSITIVE SET: Information about the target parent node to be summarized
The following {n} documents belong to the same community detected from a corpus graph.

{docs}

## YOUR TASK & OUTPUT FORMAT

Your entire output must be a single, valid JSON object. Inside this JSON you will follow the 3-step thinking process outlined below, populating each field as instructed.

### JSON Structure and Instructions:

{
"detailed_fingerprints": [
// For EACH document in the POSITIVE SET (target parent node),
// extract a structured object of its key, queryable facts.
{
"one_line_summary": "...", // very information-dense, concise one-line summary
"key_entities": ["..."], // a few key entities central to this document
"genre_or_category": ["..."], // a few key genres / categories
"name": "..." // name the document
}
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
}

## IMPORTANT GUIDELINES
- The summary MUST include the specific entities extracted in step 1 (key_entities). Avoid vague labels like "Various topics" or "Miscellaneous".
- Focus on the majority theme. If some documents do not align with the main theme, down-weight them rather than forcing them into the summary.
- The "concept" is a short label; the "summary" is the detailed description.
- Output JSON only --- no markdown code fences, no explanation text.

Your Response (JSON only):"""

# "plain": line breaks where the table row has a space between parts, ASCII quotes
_PLAIN_BREAKS = {
    GAREN_REASONING_USER: ("[Query] {query}\n[Documents]\n{docs}",),
    GAREN_NON_REASONING_USER: (" {docs} Search Query: {query}. Rank", "\n{docs}\nSearch Query: {query}.\nRank"),
    NAVIGATOR_USER: (" <Query>: {query} <Document>: {doc}", "\n<Query>: {query}\n<Document>: {doc}"),
}
_TYPESET_QUOTES = (("\u2018\u2018", '"'), ("\u2019\u2019", '"'), ("\u2019", "'"))
_PLACEHOLDER = re.compile(r"\{(query|docs|doc|n_docs|n)\}")


def template(paper_text: str, text: str = "paper") -> str:
    """A GAREN template in the chosen reading."""
    if text not in PROMPT_TEXTS:
        raise GarenError(f"unknown prompt text '{text}'; choose one of {', '.join(PROMPT_TEXTS)}")
    if text == "paper":
        return paper_text
    out = paper_text
    rule = _PLAIN_BREAKS.get(paper_text)
    if rule:
        out = rule[0] if len(rule) == 1 else out.replace(*rule)
    for typeset, ascii_quote in _TYPESET_QUOTES:
        out = out.replace(typeset, ascii_quote)
    return out


def fill(template_text: str, **values) -> str:
    """Put values into a template's {placeholders} in one pass (a document containing "{query}" stays as it is)."""
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template_text)


def garen_non_reasoning(query: str, docs: list[str], max_words: int = MAX_PASSAGE_WORDS, text: str = "paper", task: str = "") -> Chat:
    user = fill(template(GAREN_NON_REASONING_USER, text), docs=_numbered(docs, max_words), query=query, n_docs=len(docs))
    return [{"role": "system", "content": GAREN_NON_REASONING_SYSTEM}, {"role": "user", "content": user}]


def garen_reasoning(query: str, docs: list[str], max_words: int = MAX_PASSAGE_WORDS, text: str = "paper", task: str = "") -> Chat:
    user = fill(template(GAREN_REASONING_USER, text), query=query, docs=_numbered(docs, max_words))
    return [{"role": "system", "content": template(GAREN_REASONING_SYSTEM, text)}, {"role": "user", "content": user}]


LISTWISE_PROMPTS = {"rankgpt": rankgpt, "garen": garen_non_reasoning, "garen-reasoning": garen_reasoning, "rgs-author": rgs_author}
# the reranker's output budget follows from its prompt (App. G): a ranking of 20 ids, or a reasoning trace first
PROMPT_MAX_TOKENS = {"rankgpt": 200, "garen": 200, "garen-reasoning": 4096, "rgs-author": 200}
PROMPT_MAX_WORDS = {"rgs-author": None}  # words per passage when the role does not say; others: MAX_PASSAGE_WORDS
PROMPT_PARSERS = {"rgs-author": parse_all_or_identity}  # others: rank_llm's rule (permutation.parse_permutation)

# ---- Pointwise yes/no: the Qwen3-Reranker format (GAREN App. G Table 10 navigator; anchors.md sec. 7) ----------
DEFAULT_INSTRUCTION = "Given a query, retrieve relevant passages that answer the query."  # GAREN Table 10
YES_NO_SYSTEM = template(NAVIGATOR_SYSTEM, "plain")  # Qwen3-Reranker's own system prompt
# Qwen3-Reranker answers after an empty think block; the assistant turn is opened with it.
QWEN3_ASSISTANT_PREFIX = "<think>\n\n</think>\n\n"


def yes_no(query: str, document: str, instruction: str = DEFAULT_INSTRUCTION, text: str = "plain") -> Chat:
    """Qwen3-Reranker's format ("plain", the default for any yes/no scorer) or GAREN's navigator row as printed."""
    user = template(NAVIGATOR_USER, text).replace(DEFAULT_INSTRUCTION, instruction, 1)
    return [{"role": "system", "content": template(NAVIGATOR_SYSTEM, text)}, {"role": "user", "content": fill(user, query=query, doc=document)}]


def summarizer(docs: list[str], max_words: int | None = MAX_PASSAGE_WORDS, text: str = "paper") -> Chat:
    body = "\n\n".join(f"[{i}] {passage(d, max_words)}" for i, d in enumerate(docs, start=1))
    user = fill(template(SUMMARIZER_USER, text), n=len(docs), docs=body)
    return [{"role": "system", "content": SUMMARIZER_SYSTEM}, {"role": "user", "content": user}]
