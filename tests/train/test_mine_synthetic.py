"""``garen-train mine-synthetic`` on the tiny corpus: queries written from the corpus, GAREN's own traversal
(cpu-default
models, the real index), pairs labelled by each query's source document, and no judgment read anywhere: the
command works with the qrels and queries files absent or unreadable, and its manifest says what it read."""

from __future__ import annotations

import json
import shutil

import pytest
from conftest import DOCS, one_error_line

from garen_infer.data.dataset import Document
from garen_infer.errors import GarenError
from garen_infer.index.first_stage import FirstStageConfig, first_stage
from garen_train.cli import main
from garen_train.mine_synthetic import beyond_first_window, synthetic_dataset
from garen_train.mining.folder import read_mined
from garen_train.mining.synthetic import (
    ExtractiveWriter,
    GeneratorWriter,
    duplicate_rows,
    sample_documents,
    words,
)

# windows of 4 keeping 2, budget 8, K_g 2: several navigator rounds per query on 12 documents
SMALL = ["--budget", "8", "--set", "methods.garen.window=4", "--set", "methods.garen.keep=2", "--set",
         "methods.garen.k_groups=2"]
DOCUMENTS = [Document(d, x, t) for d, t, x in DOCS]


def mine_synthetic(corpus, index, out, *extra):
    return main(["mine-synthetic", "--corpus", str(corpus), "--index", str(index.path), "--out", str(out), "--no-cache",
                 "--queries", "6", *SMALL, "--keep", "all", *extra])


@pytest.fixture(scope="module", params=["absent", "unreadable"])
def corpus_only(request, beir_dir, tmp_path_factory):
    """The tiny corpus with no judgments: queries.jsonl and qrels/ left out, or there but unreadable."""
    folder = tmp_path_factory.mktemp("corpus") / "tiny"
    folder.mkdir()
    shutil.copy(beir_dir / "corpus.jsonl", folder / "corpus.jsonl")
    if request.param == "unreadable":
        (folder / "qrels").mkdir()
        (folder / "qrels" / "test.tsv").write_bytes(b"\xff\xfe not a qrels file\n")
        (folder / "queries.jsonl").write_text("{not json\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def mined(corpus_only, full_index, tmp_path_factory):
    out = tmp_path_factory.mktemp("synthetic") / "mined"
    assert mine_synthetic(corpus_only, full_index, out, "--negatives", "2") == 0
    return out


def test_each_query_leads_to_its_source_documents_groups(mined, full_index, tiny_dataset):
    pairs = read_mined(mined, purpose="training")  # training data: fit accepts it
    groups, documents = pairs.groups, pairs.documents
    index_groups, doc_index = full_index.groups(), tiny_dataset.doc_index
    sources = {g["qid"]: g["qid"].removeprefix("synthetic-") for g in groups}
    assert len(sources) == 6 and set(sources.values()) <= set(doc_index)
    for g in groups:
        source_group = index_groups.doc_group[doc_index[sources[g["qid"]]]]
        assert g["label"] == int(g["item"] == str(source_group)) and g["text"] == index_groups.texts[int(g["item"])]
    for qid, source in sources.items():  # the source group is a line once: scored, or never reached
        assert sum(g["label"] for g in groups if g["qid"] == qid) == 1
        assert [d["item"] for d in documents if d["qid"] == qid and d["label"]] == [source]
    trace = [json.loads(line) for line in (mined / "traversal" / "trace.jsonl").read_text().splitlines()]
    for record in trace:  # the groups the navigator scored in GAREN's own run, in order
        scored = [str(g) for step in record["trace"]["iterations"] for g in step["scored"]]
        assert [g["item"] for g in groups if g["qid"] == record["qid"] and g["provenance"] == "scored"] == scored
    assert sum(g["provenance"] == "scored" for g in groups) > 6


def test_the_manifest_records_that_no_judgment_was_read(mined):
    manifest = read_mined(mined).manifest
    assert manifest["inputs"]["judgments"].startswith("none read")
    assert manifest["inputs"]["corpus"]["path"].endswith("corpus.jsonl") and manifest["inputs"]["corpus"][
        "sha256"
    ].startswith("sha256:")
    assert manifest["dataset"]["name"] == "tiny/synthetic" and manifest["purpose"] == "training"
    counts = manifest["synthetic"]["counts"]
    assert counts["asked"] == 6 and counts["written"] == 6 and counts["unusable"] == {}
    assert sum(counts["styles"].values()) == 6 and manifest["synthetic"]["writer"] == "extractive"


def test_a_second_run_resumes_and_writes_the_same_pairs(mined, corpus_only, full_index, tmp_path):
    before = read_mined(mined)
    copy = tmp_path / "again"
    shutil.copytree(mined, copy)
    assert mine_synthetic(corpus_only, full_index, copy, "--negatives", "2") == 0
    assert read_mined(copy).groups == before.groups


def test_documents_sampled_over_groups_cover_every_group_first(full_index):
    members = full_index.groups().members
    rows = sample_documents(members, DOCUMENTS, len(members), seed=3)
    assert len(rows) == len(set(rows)) == len(members)
    assert {full_index.groups().doc_group[r] for r in rows} == set(range(len(members)))  # one from each group
    assert sample_documents(members, DOCUMENTS, 100) == sample_documents(members, DOCUMENTS, 100)  # seeded
    assert len(sample_documents(members, DOCUMENTS, 100)) == len(DOCUMENTS)  # no document twice


def test_the_extractive_writer_writes_each_form_from_the_documents_own_words():
    title = ExtractiveWriter(DOCUMENTS, "title").write([0])
    sentence = ExtractiveWriter(DOCUMENTS, "sentence").write([4])
    keyphrases = ExtractiveWriter(DOCUMENTS, "keyphrases").write([10])
    assert title == ["Volcanic eruptions"]
    assert sentence == [DOCUMENTS[4].text]  # the one sentence of 6-40 words
    assert set(keyphrases[0].split()) <= set(
        DOCUMENTS[10].full_text.lower().replace(".", " ").replace(";", " ").split()
    )
    assert len(keyphrases[0].split()) == 6
    mixed = ExtractiveWriter(DOCUMENTS, "mixed", seed=0)
    assert mixed.write(list(range(12))) == ExtractiveWriter(DOCUMENTS, "mixed", seed=0).write(list(range(12)))
    assert len(mixed.counts.styles) == 3  # all three forms appear across the corpus


def test_an_obscured_query_leaves_out_the_terms_that_make_its_document_easy_to_find():
    writer = ExtractiveWriter(DOCUMENTS, "obscured")
    for row, query in enumerate(writer.write(list(range(len(DOCUMENTS))))):
        assert query is not None and len(query.split()) >= 5
        assert set(query.split()) <= set(words(DOCUMENTS[row].text))  # the body's words, not the title's
        assert not set(query.split()) & set(writer.distinctive_terms(DOCUMENTS[row], 6))
    assert writer.counts.styles == {"obscured": len(DOCUMENTS)}


def test_a_reworded_query_swaps_its_documents_distinctive_terms_for_near_words_it_does_not_hold(full_index):
    embed = full_index.embedder.encode_documents
    writer = ExtractiveWriter(DOCUMENTS, "reworded", embed=embed)
    queries = writer.write(list(range(len(DOCUMENTS))))
    assert queries == ExtractiveWriter(DOCUMENTS, "reworded", embed=embed).write(list(range(12)))
    for row, query in enumerate(queries):
        own = set(words(DOCUMENTS[row].full_text))
        distinctive = set(writer.distinctive_terms(DOCUMENTS[row], 12))
        assert not set(query.split()) & distinctive  # every distinctive term swapped or left out
        assert set(query.split()) - own <= set(writer.vocabulary)  # what came in is the corpus's own words
    assert any(set(q.split()) - set(words(DOCUMENTS[r].full_text)) for r, q in enumerate(queries))
    with pytest.raises(GarenError, match="needs an embedding model"):
        ExtractiveWriter(DOCUMENTS, "reworded")


class _NeighbourTitleWriter:
    """Writes, for each document, the next one's title: a query its source may or may not rank high for."""

    def __init__(self):
        self.counts = ExtractiveWriter(DOCUMENTS).counts

    def write(self, rows):
        self.counts.asked += len(rows)
        return [DOCUMENTS[(r + 1) % len(DOCUMENTS)].title for r in rows]


def test_beyond_window_keeps_only_queries_whose_source_the_first_window_misses(full_index):
    preset = {"methods": {"garen": {"window": 2, "keep": 1}}, "first_stage": {"depth": 12}}
    def select(wanted):
        candidates = list(range(12))
        return beyond_first_window(candidates, _NeighbourTitleWriter(), full_index, preset, DOCUMENTS, wanted)

    rows, texts, selection = select(100)
    assert selection["written"] == sum(selection["source_ranks"].values()) == 12
    assert 0 < len(rows) == selection["kept"] == selection["source_ranks"]["beyond_first_window"] < 12
    for row, text, ranking in zip(rows, texts, first_stage(full_index, texts, FirstStageConfig(depth=12))):
        assert text == DOCUMENTS[(row + 1) % 12].title
        assert ranking.index(row) >= 2  # found, beyond the window of 2
    assert select(1)[0] == rows[:1]  # it stops once it has what it wants


def test_a_corpus_whose_queries_all_find_their_source_first_is_one_line(corpus_only, full_index, tmp_path,
                                                                          capsys):
    # the tiny corpus's own words find their source in the first window every time: nothing to learn from
    assert mine_synthetic(corpus_only, full_index, tmp_path / "out", "--keep", "beyond-window") == 2
    assert "beyond GAREN's first window (try --keep all)" in one_error_line(capsys)
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_a_document_with_no_words_is_counted_not_hidden():
    writer = ExtractiveWriter([*DOCUMENTS, Document("empty", "", "")], "sentence")
    assert writer.write([12]) == [None]
    assert writer.counts.as_dict()["unusable"] == {"no words": 1}


def test_duplicates_of_the_source_are_positives_too():
    documents = [*DOCUMENTS, Document("vol1-copy", DOCUMENTS[0].text.upper(), DOCUMENTS[0].title)]
    assert duplicate_rows(documents) == {0: {0, 12}, 12: {0, 12}}
    dataset = synthetic_dataset("tiny", documents, [0, 5, 6], ["why do volcanoes erupt", None, "calvin cycle"])
    assert [q.id for q in dataset.queries] == ["synthetic-vol1", "synthetic-pho3"]  # the unusable one is left out
    assert dataset.qrels == {"synthetic-vol1": {"vol1": 1, "vol1-copy": 1}, "synthetic-pho3": {"pho3": 1}}


class _Completion:
    def __init__(self, text, finish_reason="stop", cached=False):
        self.text, self.finish_reason, self.cached = text, finish_reason, cached


def test_the_generator_writer_reads_one_line_and_counts_what_it_cannot_use():
    read = GeneratorWriter.read_answer
    assert read(_Completion('Query: "why do volcanoes erupt?"\nmore text')) == ("why do volcanoes erupt?", None)
    assert read(_Completion("   \n")) == (None, "empty answer")
    assert read(_Completion("why do volcanoes", finish_reason="length")) == (None, "cut off by max_tokens")
    assert read(_Completion("?!")) == (None, "no words")


def test_the_generator_writer_asks_the_generator_role_through_the_cache(tiny_model_dir, tmp_path):
    from garen_infer.llm.cache import ResponseCache
    from garen_infer.llm.roles import build_roles

    spec = {"backend": "transformers", "model": str(tiny_model_dir), "device": "cpu", "sampling": {"max_tokens": 6}}
    counts = []
    for _ in range(2):
        generator = build_roles({"generator": spec}, [], None, ResponseCache(tmp_path / "cache.sqlite")).generator
        writer = GeneratorWriter(generator, DOCUMENTS)
        written = writer.write([0, 1, 2])
        counts.append(writer.counts.as_dict())
    assert counts[0]["asked"] == 3 and counts[0]["cached"] == 0
    assert counts[1]["cached"] == 3  # the same prompts, answered from the cache the second time
    # every answer is a query or a counted problem
    assert counts[1]["written"] + sum(counts[1]["unusable"].values()) == 3
    assert len(written) == 3


def test_the_generator_writer_needs_a_generator(corpus_only, full_index, tmp_path, capsys):
    assert mine_synthetic(corpus_only, full_index, tmp_path / "out", "--writer", "generator") == 2
    assert "has no models.generator" in one_error_line(capsys)
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_a_corpus_that_is_not_there_is_one_line(full_index, tmp_path, capsys):
    assert mine_synthetic(tmp_path / "nowhere", full_index, tmp_path / "out") == 2
    assert "no corpus.jsonl there" in one_error_line(capsys)
