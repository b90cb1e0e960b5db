"""Every prompt the toolkit sends, as data, each with its source. No random text (it would defeat the cache).

Listwise reranker prompts take ``docs`` as (1-based id, passage) pairs; passages are whitespace-truncated to
``max_words`` and any "[n]" inside them is rewritten to "(n)" so it cannot be mistaken for an id (rank_llm).
"""

from __future__ import annotations

import re

from garen_infer.errors import GarenError
from garen_infer.llm.rgs_prompt import parse_all_or_identity, rgs_author
from garen_infer.llm.types import Chat

MAX_PASSAGE_WORDS = 300  # rank_llm's default (RankLLM, SIGIR 2025, arXiv 2505.19284)

_BRACKETED_NUMBER = re.compile(r"\[(\d+)\]")


def passage(text: str, max_words: int | None = MAX_PASSAGE_WORDS) -> str:
    words = text.split()
    return _BRACKETED_NUMBER.sub(r"(\1)", " ".join(words[:max_words]))


# ---- RankGPT (Sun et al., 2023) as in rank_llm: a multi-turn conversation, one turn per passage ----------------
def rankgpt(query: str, docs: list[str], max_words: int | None = MAX_PASSAGE_WORDS, text: str = "paper", task: str = "") -> Chat:
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


def _numbered(docs: list[str], max_words: int | None) -> str:
    return "\n".join(f"[{i}] {passage(doc, max_words)}" for i, doc in enumerate(docs, start=1))


# ---- GAREN App. G (Tables 10 and 11), word for word ----------------------------------------------------------
# The templates below are the paper's text byte for byte (GAREN, arXiv 2609.02188, App. G; the prompts' test
# checks them against a pinned hash, and against the paper's text when it is at hand). The paper prints the
# reranker and navigator prompts as table rows, with a space where a layout would break the line, and typesets
# quotes (‘‘yes’’, user’s). ``text`` picks the reading:
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
        out = rule[0] if len(rule) == 1 else out.replace(rule[0], rule[1])
    for typeset, ascii_quote in _TYPESET_QUOTES:
        out = out.replace(typeset, ascii_quote)
    return out


def fill(template_text: str, **values) -> str:
    """Put values into a template's {placeholders} in one pass (a document containing "{query}" stays as it is)."""
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template_text)


def garen_non_reasoning(query: str, docs: list[str], max_words: int | None = MAX_PASSAGE_WORDS, text: str = "paper", task: str = "") -> Chat:
    user = fill(template(GAREN_NON_REASONING_USER, text), docs=_numbered(docs, max_words), query=query, n_docs=len(docs))
    return [{"role": "system", "content": GAREN_NON_REASONING_SYSTEM}, {"role": "user", "content": user}]


def garen_reasoning(query: str, docs: list[str], max_words: int | None = MAX_PASSAGE_WORDS, text: str = "paper", task: str = "") -> Chat:
    user = fill(template(GAREN_REASONING_USER, text), query=query, docs=_numbered(docs, max_words))
    return [{"role": "system", "content": template(GAREN_REASONING_SYSTEM, text)}, {"role": "user", "content": user}]


LISTWISE_PROMPTS = {"rankgpt": rankgpt, "garen": garen_non_reasoning, "garen-reasoning": garen_reasoning, "rgs-author": rgs_author}
# the reranker's output budget follows from its prompt (App. G): a ranking of 20 ids, or a reasoning trace first
PROMPT_MAX_TOKENS = {"rankgpt": 200, "garen": 200, "garen-reasoning": 4096, "rgs-author": 200}
PROMPT_MAX_WORDS = {"rgs-author": None}  # words per passage when the role does not say; others: MAX_PASSAGE_WORDS
PROMPT_PARSERS = {"rgs-author": parse_all_or_identity}  # others: rank_llm's rule (permutation.read_permutation)

# ---- Pointwise yes/no: the Qwen3-Reranker format (GAREN App. G Table 10 navigator; Zhang et al., "Qwen3
# Embedding: Advancing Text Embedding and Reranking Through Foundation Models", arXiv 2506.05176) ----------
DEFAULT_INSTRUCTION = "Given a query, retrieve relevant passages that answer the query."  # GAREN Table 10
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


# ---- LATTICE (Gupta et al., 2025, arXiv 2510.13217): scoring a slate of tree nodes -------------------------
# The paper's node-scoring prompt (App. D, Fig. 10) in two versions, internal nodes and leaf passages, with the same
# sections, fields and JSON answer: `reasoning` (string), `ranking` (integers), `relevance_scores` ([[id, 0-100],
# ...]). Worded here, not copied. Candidates are 0-based "[i]. text" with line breaks collapsed, as in the reference
# code. Unlike the reference code, no random "prompt id" is appended: it defeated caching and consumed the RNG.
LATTICE_RELEVANCE = {  # by BRIGHT task family (reference code); "generic" for corpora outside BRIGHT
    "stackexchange": "A document is relevant when an accepted or highly rated answer to the query could cite it "
                     "because it supplies a concept or theory that the reasoning needs.",
    "leetcode": "A document is relevant when it solves a coding problem with the same algorithm or data structure "
                "that the query's problem needs.",
    "theorem": "A document is relevant when it uses or states the same theorem (or a closely related one) that "
               "the query relies on.",
    "pony": "A document is relevant when the query's coding task needs the syntax it documents.",
    "generic": "A document is relevant when it contains information that directly helps to answer the query.",
}
BRIGHT_RELEVANCE = {"leetcode": "leetcode", "pony": "pony", "aops": "theorem", "theoremqa_questions": "theorem",
                    "theoremqa_theorems": "theorem"}  # every other BRIGHT task: "stackexchange"

_LATTICE_ANSWER_FORMAT = """## Answer format
Reply with one JSON object and nothing else. It has three keys:
- "reasoning": a string with your analysis;
- "ranking": an array of integers, the candidate ids from most to least promising;
- "relevance_scores": an array of [candidate_id, score] pairs, one per candidate, each score an integer from 0 to 100, e.g. [[0, 40], [1, 85], [2, 10]]."""

LATTICE_INTERNAL_PROMPT = """You are a search agent that walks down a tree of topics to find the documents that answer a user's query. Each candidate below is a topic of the tree, described by a summary of the documents beneath it. Decide which topics are most likely to lead to relevant documents.

Relevance: {relevance}

## Query
{query}

## Candidates
Each candidate starts with its id in square brackets.

{candidates}

## What to do
1. State the core problem the query poses.
2. Reason, candidate by candidate, whether documents under that topic would be relevant; write this in "reasoning".
3. Order the candidates from most to least promising in "ranking".
4. Give every candidate a relevance score from 0 to 100 consistent with your ranking in "relevance_scores".

{answer_format}"""

LATTICE_LEAF_PROMPT = """You are a search agent judging candidate passages for a user's query. Decide which passages are most relevant.

Relevance: {relevance} A passage counts only if its own text, read alone, contributes substantive content to the answer. A passage that merely names the topic, or is only a title, a heading, a table of contents or a pointer to other material, does not count.

## Query
{query}

## Candidates
Each candidate starts with its id in square brackets.

{candidates}

## What to do
1. State the core problem the query poses.
2. Reason, passage by passage, whether it is relevant; write this in "reasoning".
3. Order the passages from most to least relevant in "ranking".
4. Give every passage a relevance score from 0 to 100 in "relevance_scores": high only for passages that hold the answer or a key part of it, low for passages that only point elsewhere.

{answer_format}"""


def lattice_slate(query: str, candidates: list[str], relevance: str, leaf: bool, max_words: int = 0) -> Chat:
    """One LATTICE slate as a single user turn; ``max_words`` > 0 truncates each candidate (0 = full text)."""
    lines = []
    for i, text in enumerate(candidates):
        text = " ".join(text.split()[:max_words]) if max_words else text
        lines.append(f"[{i}]. {' '.join(text.split())}")
    prompt = LATTICE_LEAF_PROMPT if leaf else LATTICE_INTERNAL_PROMPT
    content = prompt.format(relevance=relevance, query=" ".join(query.split()), candidates="\n\n".join(lines),
                              answer_format=_LATTICE_ANSWER_FORMAT)
    return [{"role": "user", "content": content}]


# ---- LATTICE tree construction (paper sec. 2.1, App. B.3, App. D Figs. 11-12): worded here -------------------
LATTICE_NODE_SUMMARY_PROMPT = """Below are the {n} members of one node of a topic tree that a search agent will navigate. Write the node's description: the agent reads it to decide whether the documents it is looking for lie beneath this node.

{members}

Reply with one JSON object and nothing else: {{"concept": "<a label of one to five words>", "summary": "<three to six information-dense sentences naming the shared theme and the specific entities, methods and findings the members cover>"}}"""


def lattice_node_summary(members: list[str], max_words: int = MAX_PASSAGE_WORDS) -> Chat:
    body = "\n\n".join(f"[{i}] {passage(m, max_words)}" for i, m in enumerate(members, start=1))
    return [{"role": "user", "content": LATTICE_NODE_SUMMARY_PROMPT.format(n=len(members), members=body)}]


LATTICE_LEVELS_PROMPT = """Describe the document below at {levels} levels of detail, from the broadest field it belongs to down to its most specific subject. Level 1 is a very general area shared by many documents (two or three words); each following level narrows the previous one; level {levels} is a short phrase that pins down this document's particular topic.

Document:
{document}

Reply with one JSON object and nothing else: {{"levels": ["<level 1>", ..., "<level {levels}>"]}}"""


def lattice_levels(document: str, levels: int, max_words: int = MAX_PASSAGE_WORDS) -> Chat:
    return [{"role": "user", "content": LATTICE_LEVELS_PROMPT.format(levels=levels, document=passage(document, max_words))}]


LATTICE_CLUSTER_PROMPT = """Below are {n} topic descriptions, each with an id in square brackets. Group them into between {low} and {high} clusters of related topics, so that a search agent can choose the right cluster from its description alone. Every id belongs to exactly one cluster.

{keywords}

Reply with one JSON object and nothing else: {{"clusters": [{{"name": "<a label of one to five words>", "description": "<two to four sentences saying what the cluster covers and what sets it apart from the others>", "members": [<ids>]}}, ...]}}"""


def lattice_cluster(keywords: list[str], low: int, high: int) -> Chat:
    body = "\n".join(f"[{i}] {' '.join(k.split())}" for i, k in enumerate(keywords))
    return [{"role": "user", "content": LATTICE_CLUSTER_PROMPT.format(n=len(keywords), low=low, high=high, keywords=body)}]
