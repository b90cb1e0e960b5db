"""First-stage BM25: the bm25s variant, and BRIGHT's BM25Q (gensim LuceneBM25Model, k1=0.9, b=0.4, the query
weighted by the same model) checked by hand against its formula."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from conftest import DOCS

from garen_infer.index.lexical.bm25 import BRIGHT_BM25, Bm25Index, Bm25Params, idf_reference, tokenize

TEXTS = [f"{title}\n{text}" for _, title, text in DOCS]

BRIGHT_TEXTS = [
    "lava lava flows from the volcano",
    "the volcano erupts ash",
    "chlorophyll captures light in leaves",
    "python lists and python dictionaries",
]


def test_bm25s_ranks_the_matching_document_first():
    index = Bm25Index.build(TEXTS, Bm25Params())
    hits = index.search(["chloroplast organelles in leaf cells", "aircraft jet engines and ash"], k=5)
    assert hits[0][0][0] == 5  # pho2: Chloroplasts
    assert hits[1][0][0] == 2  # vol3: Volcanic ash
    for ranking in hits:
        scores = [s for _, s in ranking]
        assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)


def test_bm25s_query_without_known_terms_finds_nothing():
    index = Bm25Index.build(TEXTS, Bm25Params())
    assert index.search(["zebra quantum", "the and of"], k=5) == [[], []]


def lucene_weight(tf: int, dl: int, df: int, n: int, avgdl: float, k1=0.9, b=0.4) -> float:
    idf = math.log(n + 1) - math.log(df + 0.5)
    return idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))


def bright_score_by_hand(query: str, doc_row: int) -> float:
    docs = tokenize(BRIGHT_TEXTS, BRIGHT_BM25)
    n, avgdl = len(docs), sum(map(len, docs)) / len(docs)
    df = Counter(t for d in docs for t in set(d))
    # gensim's doc2bow drops words outside the corpus vocabulary, so the query length counts known terms only
    query_terms = Counter(t for t in tokenize([query], BRIGHT_BM25)[0] if t in df)
    query_len = sum(query_terms.values())
    doc_terms = Counter(docs[doc_row])
    return sum(
        lucene_weight(doc_terms[t], len(docs[doc_row]), df[t], n, avgdl)
        * lucene_weight(q_tf, query_len, df[t], n, avgdl)
        for t, q_tf in query_terms.items()
        if t in doc_terms
    )


def test_bright_variant_uses_lucene_k1_b():
    assert (BRIGHT_BM25.variant, BRIGHT_BM25.k1, BRIGHT_BM25.b) == ("bright", 0.9, 0.4)
    assert idf_reference(df=2, n_docs=4) == pytest.approx(math.log(5) - math.log(2.5))


@pytest.mark.parametrize(
    "query",
    [
        "volcano lava",
        "lava lava volcano ash",  # a repeated query term is weighted by the model too (BM25Q)
        "why does the volcano spew lava and magma near Hawaii",  # words the corpus never saw
    ],
)
def test_bright_scores_match_the_formula(query):
    index = Bm25Index.build(BRIGHT_TEXTS, BRIGHT_BM25)
    hits = dict(index.search([query], k=10)[0])
    for row in range(len(BRIGHT_TEXTS)):
        expected = bright_score_by_hand(query, row)
        assert hits.get(row, 0.0) == pytest.approx(expected, rel=1e-9)
    assert max(hits, key=hits.get) == 0  # the lava-and-volcano document


def test_bright_worked_example():
    """One score written out: query 'volcano ash' against document 1 ('the volcano erupts ash')."""
    index = Bm25Index.build(BRIGHT_TEXTS, BRIGHT_BM25)
    # tokens (stopwords out, stemmed): [lava lava flow from volcano] [volcano erupt ash]
    # [chlorophyl captur light leav] [python list python dictionari] -> N = 4, avgdl = 16/4
    avgdl, k1, b = 16 / 4, 0.9, 0.4
    idf_volcano, idf_ash = math.log(5) - math.log(2.5), math.log(5) - math.log(1.5)
    doc_norm = k1 * (1 - b + b * 3 / avgdl)  # dl = 3
    query_norm = k1 * (1 - b + b * 2 / avgdl)  # ql = 2
    expected = (idf_volcano / (1 + doc_norm)) * (idf_volcano / (1 + query_norm)) + (
        idf_ash / (1 + doc_norm)
    ) * (idf_ash / (1 + query_norm))
    assert [len(t) for t in tokenize(BRIGHT_TEXTS, BRIGHT_BM25)] == [5, 3, 4, 4]
    hits = index.search(["volcano ash"], k=4)[0]
    assert hits[0][0] == 1
    assert hits[0][1] == pytest.approx(expected, rel=1e-9)
    assert len(hits) == 2  # document 0 shares 'volcano'; the others share nothing and are left out


@pytest.mark.parametrize("params", [Bm25Params(), BRIGHT_BM25], ids=["bm25s", "bright"])
def test_save_load_round_trip(tmp_path, params):
    index = Bm25Index.build(TEXTS, params)
    queries = ["volcanic ash clouds", "python generator yield", "sunlight glucose oxygen"]
    before = index.search(queries, k=12)
    index.save(tmp_path / "bm25")
    assert not list(tmp_path.glob(".bm25.*"))  # the temporary folder is gone after the rename
    loaded = Bm25Index.load(tmp_path / "bm25")
    assert loaded.params == params
    after = loaded.search(queries, k=12)
    assert [[r for r, _ in h] for h in after] == [[r for r, _ in h] for h in before]
    for h_after, h_before in zip(after, before):
        assert [s for _, s in h_after] == pytest.approx([s for _, s in h_before])


def test_unknown_variant():
    with pytest.raises(ValueError, match="unknown BM25 variant"):
        Bm25Index.build(TEXTS, Bm25Params(variant="okapi"))
