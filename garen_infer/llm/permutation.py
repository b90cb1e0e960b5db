"""Turning a listwise reranker's free text into a permutation, the way rank_llm does (anchors.md sec. 6).

Everything before the last ``</think>`` is dropped, fancy digits become ASCII, every other character becomes a
separator; the numbers are 1-based ids. Duplicates keep their first occurrence, out-of-range ids are dropped,
ids the model forgot are appended in input order, and text with no usable id gives the identity.
"""

from __future__ import annotations

import re
import unicodedata

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)


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


def clean_response(text: str) -> str:
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    answers = _ANSWER.findall(text)
    if answers:  # GAREN's non-reasoning prompt asks for <answer> [] > [] </answer>
        text = answers[-1]
    elif "[Document Ranking]" in text:  # GAREN's reasoning prompt: the ranking follows its own header
        text = text.rsplit("[Document Ranking]", 1)[1]
    elif "[Reasoning Trace]" in text:  # reasoning cut off before its ranking: its step numbers are not ids
        text = ""
    return _ascii_digits(text)


def parse_permutation(text: str, n: int) -> list[int]:
    """Return a permutation of range(n) (0-based) read from a model's ranking text."""
    try:
        numbers = [int(tok) - 1 for tok in re.sub(r"[^0-9]", " ", clean_response(text)).split()]
    except Exception:  # noqa: BLE001 - rank_llm's contract: any failure means the identity
        return list(range(n))
    order, seen = [], set()
    for i in numbers:
        if 0 <= i < n and i not in seen:
            seen.add(i)
            order.append(i)
    return order + [i for i in range(n) if i not in seen]
