"""The pieces RARG ranks: paragraphs (RARG+), matches (RARG++), pattern keywords, and top-k with stable ties."""

from __future__ import annotations

import random

import numpy as np
import pytest

from garen_infer.agent.excerpts import (
    count_units,
    excerpt_text,
    focus_keywords,
    split_paragraphs,
    split_units,
)
from garen_infer.agent.relevance import constructed_query, top_rows


def test_paragraphs_stay_within_400_to_1000_characters():
    rng = random.Random(0)
    words = "magma lava ash crust eruption basalt pressure chamber vent plume".split()
    for _ in range(200):
        sentences = [
            " ".join(rng.choices(words, k=rng.randint(3, 30))).capitalize() + "."
            for _ in range(rng.randint(1, 40))
        ]
        text = "\n".join(" ".join(sentences[i : i + 4]) for i in range(0, len(sentences), 4))
        paragraphs = split_paragraphs(text)
        assert all(len(p) <= 1000 for p in paragraphs)
        if len(text) >= 400:
            assert all(len(p) >= 400 for p in paragraphs[:-1])  # only a lone remainder may be shorter
        # nothing lost
        assert "".join(paragraphs).replace("\n", "").replace(" ", "") == text.replace("\n", "").replace(" ", "")


def test_long_lines_are_cut_at_sentence_ends():
    text = " ".join(f"Sentence number {i} ends here." for i in range(80))
    paragraphs = split_paragraphs(text)
    assert all(p.endswith(".") for p in paragraphs) and all(400 <= len(p) <= 1000 for p in paragraphs)
    assert split_paragraphs("short") == ["short"] and split_paragraphs("") == []


def test_matches_with_and_without_context():
    plain = "corpus/a.txt:3:lava flows\ncorpus/b.txt:1:ash\n"
    assert (
        split_units(plain) == ["corpus/a.txt:3:lava flows", "corpus/b.txt:1:ash"]
        and count_units(plain.encode()) == 2
    )
    context = "corpus/a.txt-2-before\ncorpus/a.txt:3:lava\n--\ncorpus/b.txt:1:ash\ncorpus/b.txt-2-after\n"
    assert split_units(context) == ["corpus/a.txt-2-before\ncorpus/a.txt:3:lava",
                                    "corpus/b.txt:1:ash\ncorpus/b.txt-2-after"]
    assert count_units(context.encode()) == 2
    assert excerpt_text("corpus/a~1f.txt:3:7:lava: hot") == "lava: hot"  # path, line and column go; colons in text stay


@pytest.mark.parametrize("patterns, keywords", [
    (["lava"], ["lava"]),
    ([r"\bmagma\b|lava.*flow"], ["magma", "lava", "flow"]),
    (["(?i)[Cc]ell death", "p53|TP53"], ["Cell", "death", "p53", "TP53"]),
    (["a|the|The"], ["the"]),
    (["ca2\\+|[0-9]+ mM"], ["ca2", "mM"]),
])
def test_focus_keywords_from_patterns(patterns, keywords):
    assert focus_keywords(patterns) == keywords


def test_constructed_query_has_the_papers_three_parts():
    assert (
        constructed_query("Find it", "why lava", ["lava|ash"])
        == "Instruct: Find it\nQuery: why lava\nRG focus: lava ash"
    )


def test_top_rows_are_best_first_with_stable_ties():
    scores = np.array([0.5, 0.9, 0.5, 0.1, 0.9, 0.5])
    assert top_rows(scores, 3) == [1, 4, 0] and top_rows(scores, 4) == [1, 4, 0, 2]
    assert top_rows(scores, 10) == [1, 4, 0, 2, 5, 3] and top_rows(scores, 0) == []
