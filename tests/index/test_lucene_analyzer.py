"""BRIGHT's BM25 analyzer against Lucene's own output (tests/fixtures/lucene_english_tokens.json, written by
scripts/lucene_fixture/make_fixture.py from Lucene 9.9.1 / Anserini 0.24: pyserini's default analyzer)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from garen_infer.index.lexical.bm25 import BRIGHT_BM25, Bm25Index, tokenize
from garen_infer.index.lexical.lucene_analyzer import english_tokens, standard_tokens
from garen_infer.index.lexical.porter import porter_stem

FIXTURE = json.loads(
    (Path(__file__).resolve().parents[1] / "fixtures" / "lucene_english_tokens.json").read_text(
        encoding="utf-8"
    )
)
CASES = FIXTURE["cases"]


@pytest.mark.parametrize("case", CASES, ids=[f"{c['group']}-{i}" for i, c in enumerate(CASES)])
def test_tokens_equal_lucene(case):
    assert standard_tokens(case["text"]) == [token for token, _ in case["standard"]]
    assert english_tokens(case["text"]) == case["english"]


def test_porter_equals_lucene_on_the_word_table():
    wrong = {w: (porter_stem(w), s) for w, s in FIXTURE["stems"].items() if english_tokens(w) != [s]}
    assert not wrong and len(FIXTURE["stems"]) > 700


def test_lucene_porter_is_not_snowball_porter():
    import Stemmer

    snowball = Stemmer.Stemmer("porter")
    # the reference C implementation's departures, which Lucene keeps and Snowball does not
    assert [porter_stem(w) for w in ("ecology", "incredibly", "es")] == ["ecolog", "incred", "es"]
    assert [snowball.stemWord(w) for w in ("ecology", "incredibly", "es")] == ["ecologi", "incredibli", "e"]


def test_bright_bm25_keeps_numbers_and_single_characters():
    # bm25s's pattern dropped "x" and split "3.14" into "14" and "1,000" into "000"
    assert tokenize(["pi is 3.14, not 1,000; an x-ray of John's ecology"], BRIGHT_BM25) == [
        ["pi", "3.14", "1,000", "x", "rai", "john", "ecolog"]
    ]
    index = Bm25Index.build(["the value 3.14 appears here", "a value 14 appears here"], BRIGHT_BM25)
    assert index.search(["3.14"], k=2)[0][0][0] == 0 and len(index.search(["3.14"], k=2)[0]) == 1


def test_long_tokens_are_cut_like_lucenes_scanner():
    assert [len(t) for t in standard_tokens("d" * 600)] == [255, 255, 90]
    assert standard_tokens("x" * 254 + "'s") == ["x" * 254, "s"]  # the window ends inside "'s"
