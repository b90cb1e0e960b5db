"""The RGS author's listwise prompt and answer rule for BRIGHT (Xu & Chen, "Beyond Sequential Reranking:
Reranker-Guided Search Improves Reasoning Intensive Retrieval", ICLR 2026, arXiv 2509.07163; the author's
run_retrieval.py).

- System: "You are an expert in {task}." + BRIGHT's short instruction for the task + the passage count; user:
  the query, then every passage in full as "[i]  text" (the author's passages are title + " " + text with square
  brackets stripped; BRIGHT documents have no title, hence the leading space), then the ranking instruction.
  This is the OpenAI-compatible branch of the author's code, the one an open model on vLLM goes through.
- Answer: each id "[i]" is placed where it first appears in the text; if ANY id is missing the answer is invalid
  and the window keeps its input order (rank_llm instead appends the missing ids). The author's models did not
  think aloud; here a thought (``<think>...</think>``) is never read for ids, as in every listwise answer.
Sampling in the author's code: temperature 0 and 10 x window output tokens.
"""

from __future__ import annotations

from garen_infer.errors import GarenError
from garen_infer.llm.permutation import ParsedRanking, answer_part, as_text
from garen_infer.llm.problems import IDS_MISSING, UNREADABLE
from garen_infer.llm.types import Chat

# BRIGHT's short per-task instructions, as the author's code lists them
BRIGHT_SHORT_INSTRUCTIONS = {
    "biology": "Given a Biology post, retrieve relevant passages that help answer the post.",
    "earth_science": "Given an Earth Science post, retrieve relevant passages that help answer the post.",
    "economics": "Given an Economics post, retrieve relevant passages that help answer the post.",
    "psychology": "Given a Psychology post, retrieve relevant passages that help answer the post.",
    "robotics": "Given a Robotics post, retrieve relevant passages that help answer the post.",
    "stackoverflow": "Given a Stack Overflow post, retrieve relevant passages that help answer the post.",
    "sustainable_living": "Given a Sustainable Living post, retrieve relevant passages that help answer the post.",
    "leetcode": "Given a Coding problem, retrieve relevant examples that help answer the problem.",
    "pony": "Given a Pony question, retrieve relevant passages that help answer the question.",
    "aops": "Given a Math problem, retrieve relevant examples that help answer the problem.",
    "theoremqa_questions": "Given a Math problem, retrieve relevant examples that help answer the problem.",
    "theoremqa_theorems": "Given a Math problem, retrieve relevant theorems that help answer the problem.",
}


def bright_task(dataset_name: str) -> str:
    """'bright/biology' or 'bright/biology:long' -> 'biology'; '' for any other dataset."""
    if not dataset_name.startswith("bright/"):
        return ""
    return dataset_name.split("/", 1)[1].split(":", 1)[0]


def rgs_author(query: str, docs: list[str], max_words: int | None = None, text: str = "paper", task: str = "") -> Chat:
    if task not in BRIGHT_SHORT_INSTRUCTIONS:
        raise GarenError("prompt 'rgs-author' needs a BRIGHT task (run on bright:<task> or set "
                         f"models.reranker.task), not '{task}'")
    n = len(docs)
    system = (f"You are an expert in {task}. {BRIGHT_SHORT_INSTRUCTIONS[task]} I will provide you with a query and {n} "
              "passages, each indicated by number identifier []. \nRank the passages based on their "
              "relevance to query.")
    shown = [" " + " ".join(d.split()[:max_words]) if max_words else " " + d for d in docs]
    passages = "\n\n".join(f"[{i}] {p.replace('[', '').replace(']', '')}" for i, p in enumerate(shown, start=1))
    user = (f"Query: {query}.\n Passages: {passages}\n\n \nRank the {n} passages above based on their relevance to the "
            "query. The passages should be listed in descending order using identifiers. The most relevant passages "
            f"should be listed first. The output format should be like [1] > [2] ... > [{n}]. Only response "
            "the ranking results, do not say any word or explain.")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def parse_all_or_identity(content, n: int) -> ParsedRanking:
    """Order ids by where "[i]" first appears; the identity if any of the n ids is missing (the author's rule), which
    leaves the whole answer unused."""
    text, problems = as_text(content)
    text, thought = answer_part(text)
    positions = [text.find(f"[{i}]") for i in range(1, n + 1)]
    if min(positions, default=0) < 0:
        missing = [IDS_MISSING] if max(positions) >= 0 else []
        return ParsedRanking(list(range(n)), [*problems, *thought, *missing, *([] if thought else [UNREADABLE])])
    return ParsedRanking(sorted(range(n), key=lambda i: (positions[i], i)), problems)
