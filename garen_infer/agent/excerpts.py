"""Cutting text into the pieces RARG ranks: paragraphs of a document (RARG+) and matches of a search (RARG++),
and the rules that turn an rg pattern into keywords (the "RG focus" of RARG++'s constructed query)."""

from __future__ import annotations

import re

_SENTENCE_END = re.compile(r"[.!?][\"')\]]?\s+")
_LOCATION = re.compile(r"^corpus/[^:\s]+?[:-](?:\d+[:-]){0,2}")  # path[:line][:column] that rg / grep print first


def split_paragraphs(text: str, min_chars: int = 400, max_chars: int = 1000) -> list[str]:
    """Paragraphs of ``min_chars``-``max_chars`` characters (RARG sec. 3.3: 400-1000), following the text's own
    lines: a line too short is joined with what follows, a text too long is cut at a sentence end (else at a
    space). Only the last paragraph may be shorter than ``min_chars`` (when the text is, or when its remainder
    does not fit into the paragraph before it)."""
    paragraphs: list[str] = []
    carry = ""
    for block in (b.strip() for b in text.splitlines()):
        if not block:
            continue
        pieces = _cut(f"{carry}\n{block}" if carry else block, min_chars, max_chars)
        paragraphs += pieces[:-1]
        carry = pieces[-1]
        if len(carry) >= min_chars:
            paragraphs.append(carry)
            carry = ""
    if carry:
        if paragraphs and len(paragraphs[-1]) + 1 + len(carry) <= max_chars:
            paragraphs[-1] += "\n" + carry
        else:
            paragraphs.append(carry)
    return paragraphs


def _cut(block: str, min_chars: int, max_chars: int) -> list[str]:
    out = []
    while len(block) > max_chars:
        # leave at least min_chars for the rest when the rest would otherwise be too short
        hi = min(max_chars, len(block) - min_chars) if len(block) < max_chars + min_chars else max_chars
        lo = min(min_chars, hi)
        window = block[lo:hi]
        ends = [m.end() for m in _SENTENCE_END.finditer(window)]
        if ends:
            at = lo + ends[-1]
        else:
            space = window.rfind(" ")
            at = lo + space + 1 if space >= 0 else hi
        out.append(block[:at].strip())
        block = block[at:].strip()
    if block:
        out.append(block)
    return out


def split_units(text: str) -> list[str]:
    """A search's output as matches: one per line, or one per ``--``-separated block when context lines are shown."""
    lines = text.splitlines()
    if "--" not in lines:
        return [line for line in lines if line]
    units: list[str] = []
    current: list[str] = []
    for line in lines:
        if line == "--":
            if current:
                units.append("\n".join(current))
            current = []
        else:
            current.append(line)
    if current:
        units.append("\n".join(current))
    return units


def count_units(data: bytes) -> int:
    """How many matches ``split_units`` would find in ``data`` (fast: called as output streams in)."""
    separators = data.count(b"\n--\n") + data.startswith(b"--\n")
    return separators + 1 if separators else data.count(b"\n")


def excerpt_text(unit: str) -> str:
    """A match without the ``corpus/<file>:<line>:`` prefix of each line: the text an embedder should score."""
    return "\n".join(_LOCATION.sub("", line, count=1) for line in unit.splitlines())


def focus_keywords(patterns: list[str]) -> list[str]:
    """Keywords from rg patterns by rules: drop escapes (``\\b``, ``\\w``), inline flags and character classes
    (a class of letters keeps its first: ``[Cc]ell`` -> ``Cell``),
    keep the words (alternatives split at ``|``), case-insensitively unique, in order."""
    words: list[str] = []
    for pattern in patterns:
        cleaned = re.sub(r"\(\?[a-zA-Z]+\)", " ", pattern)
        cleaned = re.sub(r"\\[A-Za-z]", " ", cleaned)
        cleaned = re.sub(r"\[([A-Za-z])[A-Za-z]*\]", r"\1", cleaned)  # [Cc]ell -> Cell
        cleaned = re.sub(r"\[[^\]]*\]", " ", cleaned)
        words += re.findall(r"[^\W_]+(?:['-][^\W_]+)*", cleaned)
    seen: dict[str, str] = {}
    for word in words:
        if len(word) > 1 and word.casefold() not in seen:
            seen[word.casefold()] = word
    return list(seen.values())
