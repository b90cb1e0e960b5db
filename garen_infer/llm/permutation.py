"""Turning a listwise reranker's free text into a permutation, the way rank_llm does (Sharifymoghaddam et al.,
"RankLLM: A Python Package for Reranking with LLMs", SIGIR 2025, arXiv 2505.19284), and saying what had to be
assumed on the way.

A thought is never read for ids: everything before the last ``</think>`` is dropped, and a ``<think>`` that never
closes leaves no answer at all. Of the rest, the last ``<answer>`` block is read, else what follows the last ranking
header (GAREN's ``[Document Ranking]``, or the ``**Document Ranking:**`` / ``## Document Ranking`` real models write
instead); a reasoning trace with no ranking header after it was cut before its ranking, and its step numbers are
not ids. Fancy digits become ASCII, every other character a separator; the numbers are 1-based ids. Duplicates keep
their first occurrence, out-of-range ids are dropped, ids the model forgot are appended in input order, and text
with no usable id gives the identity.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from garen_infer.llm.problems import (
    CONTENT_NOT_TEXT,
    IDS_APPENDED,
    IDS_DUPLICATE,
    IDS_MISSING,
    THOUGHT_WITHOUT_ANSWER,
    UNREADABLE,
)

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)
# "[Document Ranking]", "**Document Ranking:**", "## Document Ranking", "Document Ranking:"
_RANKING_HEADER = re.compile(r"\[\s*document ranking\s*\]|#+[ \t]*document ranking\b:?|\*\*\s*document "
                             r"ranking\s*:?\s*\*\*:?|\bdocument ranking\s*:", re.I)
_TRACE_HEADER = re.compile(r"\[\s*reasoning trace\s*\]|#+[ \t]*reasoning trace\b|\*\*\s*reasoning "
                           r"trace\s*:?\s*\*\*", re.I)


@dataclass
class ParsedRanking:
    """What was read from one answer: a permutation of the window (0-based) and the problems found (``problems.py``)."""

    order: list[int]
    problems: list[str] = field(default_factory=list)


def as_text(content) -> tuple[str, list[str]]:
    """A model's answer as text: a server may return a number, a list of parts or null as ``content``."""
    if isinstance(content, str):
        return content, []
    if content is None:
        return "", []
    if isinstance(content, list):  # content parts: {"type": "text", "text": ...}, or bare values
        content = " ".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return str(content), [CONTENT_NOT_TEXT]


def _ascii_digits(text: str) -> str:
    out = []
    for ch in text:
        if ch.isdigit() and not ("0" <= ch <= "9"):
            try:
                out.append(str(unicodedata.digit(ch)))
                continue
            except (TypeError, ValueError):
                pass
        out.append(ch)
    return "".join(out)


def answer_part(text: str, ranking: bool = True) -> tuple[str, list[str]]:
    """The part of ``text`` after any thought (``ranking``: the part of that which holds a listwise ranking), and
    THOUGHT_WITHOUT_ANSWER when a thought left none."""
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
        if not text.strip():
            return "", [THOUGHT_WITHOUT_ANSWER]
    elif "<think>" in text:  # the thought never closed (cut at max_tokens): whatever it cites is not an answer
        return "", [THOUGHT_WITHOUT_ANSWER]
    if not ranking:
        return text, []
    answers = _ANSWER.findall(text)
    if answers:  # GAREN's non-reasoning prompt asks for <answer> [] > [] </answer>
        return answers[-1], []
    headers = list(_RANKING_HEADER.finditer(text))
    if headers:  # GAREN's reasoning prompt: the ranking follows its own header
        return text[headers[-1].end() :], []
    if _TRACE_HEADER.search(text):  # reasoning cut off before its ranking: its step numbers are not ids
        return "", []
    return text, []


def clean_response(text: str) -> str:
    return _ascii_digits(answer_part(text)[0])


def read_permutation(content, n: int) -> ParsedRanking:
    """A permutation of range(n) read from a model's ranking, with what was missing, repeated or assumed."""
    text, problems = as_text(content)
    part, thought = answer_part(text)
    problems += thought
    numbers = [int(tok) - 1 for tok in re.sub(r"[^0-9]", " ", _ascii_digits(part)).split()]
    order, seen, repeated = [], set(), False
    for i in numbers:
        if 0 <= i < n:
            repeated |= i in seen
            if i not in seen:
                seen.add(i)
                order.append(i)
    if n and not order:
        return ParsedRanking(list(range(n)), problems if thought else [*problems, UNREADABLE])
    missing = [i for i in range(n) if i not in seen]
    problems += [IDS_DUPLICATE] * repeated + [IDS_MISSING, IDS_APPENDED] * bool(missing)
    return ParsedRanking(order + missing, problems)


def parse_permutation(text: str, n: int) -> list[int]:
    """Return a permutation of range(n) (0-based) read from a model's ranking text."""
    return read_permutation(text, n).order
