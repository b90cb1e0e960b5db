"""GAREN's prompts are App. G's text byte for byte (Park et al., arXiv 2609.02188): checked against the
paper's text (the arXiv HTML rendering saved as text; ``GAREN_PAPER_TEXT`` names a copy, by default the one in
../shared/reference/papers beside the benchmark data), and against a pinned hash always."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from garen_infer.llm import prompts as P

SHARED_PAPER = Path(__file__).resolve().parents[3] / "shared" / "reference" / "papers" / "garen-paper.txt"
PAPER = Path(os.environ.get("GAREN_PAPER_TEXT", SHARED_PAPER))
TEMPLATES = [P.GAREN_REASONING_SYSTEM, P.GAREN_REASONING_USER, P.GAREN_NON_REASONING_SYSTEM, P.GAREN_NON_REASONING_USER,
             P.NAVIGATOR_SYSTEM, P.NAVIGATOR_USER, P.SUMMARIZER_SYSTEM, P.SUMMARIZER_USER]
PINNED = "402fc3195dda2848bd8f7fd841c761fad09c82deb823a39e24d5e0e62b641aa3"  # sha256 of the templates, NUL-joined


def test_templates_match_the_pinned_hash():
    assert hashlib.sha256("\x00".join(TEMPLATES).encode()).hexdigest() == PINNED


def _paper_rows() -> dict[str, tuple[str, str]]:
    """Table 10's rows and Table 11's line-broken rendering, read from the paper's text."""
    if not PAPER.is_file():
        pytest.skip(f"the paper's text is not here: {PAPER} is absent (set GAREN_PAPER_TEXT)")
    lines = PAPER.read_text(encoding="utf-8").split("\n")
    rows = {}
    for title in ("Reranker (Reasoning)", "Reranker (Non-reasoning)", "Navigator", "Summarizer"):
        at = lines.index(title)
        system, user = lines[at + 1], lines[at + 2]
        assert system.startswith("System prompt\t") and user.startswith("User prompt\t")
        rows[title] = (system.split("\t", 1)[1], user.split("\t", 1)[1])
    start = len(lines) - 1 - lines[::-1].index("User prompt") + 2  # the second, line-broken Summarizer rendering
    rows["Summarizer (rendered)"] = ("", "\n".join(lines[start : lines.index("Your Response (JSON only):", start) + 1]))
    return rows


def test_templates_equal_the_papers_text():
    rows = _paper_rows()
    assert (P.GAREN_REASONING_SYSTEM, P.GAREN_REASONING_USER) == rows["Reranker (Reasoning)"]
    assert (P.GAREN_NON_REASONING_SYSTEM, P.GAREN_NON_REASONING_USER) == rows["Reranker (Non-reasoning)"]
    assert (P.NAVIGATOR_SYSTEM, P.NAVIGATOR_USER) == rows["Navigator"]
    assert P.SUMMARIZER_SYSTEM == rows["Summarizer"][0]
    assert P.SUMMARIZER_USER == rows["Summarizer (rendered)"][1]
    assert " ".join(P.SUMMARIZER_USER.split()) == rows["Summarizer"][1]  # the table row is the same text, flattened


def test_prompts_render_the_paper_text_by_default():
    chat = P.garen_non_reasoning("why is the sky blue", ["Rayleigh scattering [3]", "clouds"])
    assert chat[1]["content"].startswith(
        "I will provide you with passages, each indicated by number identifier []. Rank the passages based on their "
        "relevance to the search query. [1] Rayleigh scattering (3)\n[2] clouds Search Query: why is the sky "
        "blue. Rank the 2 passages")
    navigator = P.yes_no("q", "d", text="paper")
    assert (
        navigator[1]["content"]
        == "<Instruct>: Given a query, retrieve relevant passages that answer the query. <Query>: q <Document>: d"
    )
    assert navigator[0]["content"].endswith("‘‘yes’’ or ‘‘no’’.")
    summary = P.summarizer(["a {query} b"])[1]["content"]
    assert "‘‘discriminative signpost’’" in summary and "[1] a {query} b" in summary  # placeholders filled once


def test_plain_reading_is_the_reference_layout():
    chat = P.garen_non_reasoning("q", ["x"], text="plain")[1]["content"]
    assert "relevance to the search query.\n[1] x\nSearch Query: q.\nRank the 1 passages" in chat
    assert (
        P.yes_no("q", "d")[1]["content"]
        == "<Instruct>: Given a query, retrieve relevant passages that answer the query.\n<Query>: q\n<Document>: d"
    )
    assert P.yes_no("q", "d")[0]["content"].endswith('"yes" or "no".')  # Qwen3-Reranker's own system prompt
    plain = P.summarizer(["x"], text="plain")[1]["content"]
    assert '"discriminative signpost"' in plain and "user's query" in plain and "‘" not in plain and "’" not in plain
    assert P.garen_reasoning("q", ["x"], text="plain")[1]["content"] == "[Query] q\n[Documents]\n[1] x"
    with pytest.raises(Exception, match="unknown prompt text"):
        P.template(P.NAVIGATOR_USER, "latex")
