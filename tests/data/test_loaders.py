"""Loaders for BEIR folders, plain JSONL and BRIGHT (a local parquet copy in the hub's layout), and the dataset
specs the CLI takes. Every bad input raises one DataError whose message names the file, the line and the field."""

from __future__ import annotations

import codecs
import gzip
import json
import shutil
from pathlib import Path

import pytest
from conftest import DOCS, QRELS, QUERIES, one_error_line, write_beir, write_jsonl

from garen_infer.data import load_dataset, load_judgments
from garen_infer.data.beir import load_beir
from garen_infer.data.bright import load_bright
from garen_infer.data.jsonl import load_jsonl
from garen_infer.data.validate import read_qrels_tsv
from garen_infer.errors import DataError
from garen_infer.storage.trec import read_run


def assert_names(err: DataError, path, line=None, field=None):
    """The message says where: the file, then the line and the field when they apply."""
    message = str(err)
    assert message.startswith(str(path)), message
    assert (err.line, err.field) == (line, field), message
    if line is not None:
        assert f"line {line}" in message
    if field is not None:
        assert f"field '{field}'" in message
    assert "\n" not in message


def corpus_rows(replace: dict[int, dict] | None = None) -> list[dict]:
    """The tiny corpus as dicts, with some 0-based rows replaced (row i is on line i + 1)."""
    rows = [{"_id": d, "title": t, "text": x} for d, t, x in DOCS]
    for pos, new in (replace or {}).items():
        rows[pos] = new
    return rows


def write_corpus_lines(folder: Path, lines: list[str]) -> Path:
    path = folder / "corpus.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def beir(tmp_path) -> Path:
    return write_beir(tmp_path / "tiny")


# ---- BEIR ------------------------------------------------------------------------------------------------------
def test_beir_loads_documents_queries_and_qrels(beir):
    ds = load_beir(beir)
    assert ds.name == "tiny/test"
    assert ds.doc_ids == [d for d, _, _ in DOCS]
    assert ds.documents[0].title == "Volcanic eruptions"
    assert ds.documents[0].full_text.startswith("Volcanic eruptions\nA volcano erupts")
    assert [q.id for q in ds.queries] == ["q1", "q2", "q3", "q4"]
    assert ds.queries[2].excluded_ids == frozenset({"py2"})
    assert ds.qrels["q1"] == {"vol1": 2, "vol4": 1, "vol2": 1}
    assert sum(len(v) for v in ds.qrels.values()) == len(QRELS)


def test_beir_keeps_only_queries_judged_in_the_split(tmp_path):
    folder = write_beir(tmp_path / "b", qrels=[r for r in QRELS if r[0] != "q2"])
    assert [q.id for q in load_beir(folder).queries] == ["q1", "q3", "q4"]


def test_beir_other_split_and_trec_qrels(tmp_path):
    folder = write_beir(tmp_path / "b", split="dev")
    (folder / "qrels" / "dev.tsv").write_text("q1 0 vol1 1\nq4 0 py3 2\n")  # TREC: qid iter docid rel
    ds = load_beir(folder, "dev")
    assert ds.name == "b/dev"
    assert ds.qrels == {"q1": {"vol1": 1}, "q4": {"py3": 2}}


def test_numeric_ids_become_strings(tmp_path):
    folder = write_beir(tmp_path / "b", docs=[(1, "", "first text"), (2, "", "second text")],
                        queries=[(7, "text", [])], qrels=[(7, 2, 1)])
    ds = load_beir(folder)
    assert ds.doc_ids == ["1", "2"] and ds.qrels == {"7": {"2": 1}}


def test_duplicate_document_id(beir):
    rows = corpus_rows({4: {"_id": "vol2", "text": "again"}})
    write_jsonl(beir / "corpus.jsonl", rows)
    with pytest.raises(DataError, match="duplicate id 'vol2' \\(first seen on line 2\\)") as err:
        load_beir(beir)
    assert_names(err.value, beir / "corpus.jsonl", 5, "_id")


def test_duplicate_query_id(beir):
    write_jsonl(beir / "queries.jsonl", [{"_id": "q1", "text": "a"}, {"_id": "q1", "text": "b"}])
    with pytest.raises(DataError, match="duplicate id 'q1'") as err:
        load_beir(beir)
    assert_names(err.value, beir / "queries.jsonl", 2, "_id")


@pytest.mark.parametrize("name", ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"])
def test_a_byte_order_mark_is_dropped(beir, name):
    """Was, for qrels: "unknown query id '\ufeffquery-id'" (the BEIR header was not recognised); for JSONL: "not
    valid JSON (Unexpected UTF-8 BOM)"."""
    path = beir / name
    path.write_bytes(codecs.BOM_UTF8 + path.read_bytes())
    assert load_beir(beir) == load_beir(write_beir(beir.parent / "plain" / beir.name))


def test_a_byte_order_mark_before_a_qrels_line_without_header(beir):
    path = beir / "qrels" / "test.tsv"
    path.write_bytes(codecs.BOM_UTF8 + b"q1\tvol1\t2\nq2\tvol1\t\xff\n")
    with pytest.raises(DataError, match="not valid UTF-8") as err:  # lines are still counted from the file's start
        load_beir(beir)
    assert_names(err.value, path, 2)
    path.write_bytes(codecs.BOM_UTF8 + b"q1\tvol1\t2\n")
    assert load_beir(beir).qrels == {"q1": {"vol1": 2}}


def test_a_byte_order_mark_in_a_run_file_is_dropped(tmp_path):
    from garen_infer.storage.trec import read_run

    path = tmp_path / "run.trec"
    path.write_bytes(codecs.BOM_UTF8 + b"q1 Q0 d1 1 2.0 bm25\nq1 Q0 d2 2 1.0 bm25\n")
    assert read_run(path) == {"q1": {"d1": 2.0, "d2": 1.0}}  # was {"\ufeffq1": ...}: query q1 silently unjudged


@pytest.mark.parametrize(
    "row, field, problem",
    [
        ({"title": "no id", "text": "x"}, "_id", "missing"),
        ({"_id": "  ", "text": "x"}, "_id", "empty"),
        ({"_id": "z", "title": "t"}, "text", "missing"),
        ({"_id": "z", "text": ["not", "a", "string"]}, "text", "expected a string, got list"),
        ({"_id": "z", "title": 3, "text": "x"}, "title", "expected a string, got int"),
        ({"_id": "z", "text": "half a pair \ud800 of surrogates"}, "text", r"lone surrogate \(\\ud800\)"),
        ({"_id": "z\udfff", "text": "x"}, "_id", "lone surrogate"),
        ({"_id": "z", "title": "\ud83d", "text": "x"}, "title", "lone surrogate"),
        ({"_id": "doc 7", "text": "x"}, "_id", "id 'doc 7' holds whitespace"),
        ({"_id": "doc\t7", "text": "x"}, "_id", "holds whitespace"),
    ],
)
def test_bad_corpus_field(beir, row, field, problem):
    write_jsonl(beir / "corpus.jsonl", corpus_rows({2: row}))
    with pytest.raises(DataError, match=problem) as err:
        load_beir(beir)
    assert_names(err.value, beir / "corpus.jsonl", 3, field)


def test_empty_query_text(beir):
    write_jsonl(beir / "queries.jsonl", [{"_id": "q1", "text": "ok"}, {"_id": "q2", "text": ""}])
    with pytest.raises(DataError, match="empty") as err:
        load_beir(beir)
    assert_names(err.value, beir / "queries.jsonl", 2, "text")


def test_a_query_id_with_a_space_is_refused(beir):
    """A run file's columns are separated by whitespace: `q 1 Q0 doc 1 1.0 run` would have seven."""
    write_jsonl(beir / "queries.jsonl", [{"_id": "q1", "text": "ok"}, {"_id": "q 2", "text": "fine"}])
    with pytest.raises(DataError, match="holds whitespace") as err:
        load_beir(beir)
    assert_names(err.value, beir / "queries.jsonl", 2, "_id")


def test_excluded_ids_must_be_a_list(beir):
    write_jsonl(beir / "queries.jsonl", [{"_id": "q1", "text": "ok", "excluded_ids": "vol1"}])
    with pytest.raises(DataError, match="expected a list") as err:
        load_beir(beir)
    assert_names(err.value, beir / "queries.jsonl", 1, "excluded_ids")


def test_empty_document_needs_allow_empty_docs(beir):
    write_jsonl(beir / "corpus.jsonl", corpus_rows({5: {"_id": "pho2", "title": "", "text": "   "}}))
    with pytest.raises(DataError, match="allow-empty-docs") as err:
        load_beir(beir)
    assert_names(err.value, beir / "corpus.jsonl", 6, "text")
    ds = load_beir(beir, allow_empty_docs=True)
    assert len(ds.documents) == len(DOCS)
    assert ds.documents[ds.doc_index["pho2"]].full_text.strip() == ""


def test_a_title_alone_is_enough(beir):
    write_jsonl(beir / "corpus.jsonl", corpus_rows({5: {"_id": "pho2", "title": "Chloroplasts", "text": ""}}))
    assert load_beir(beir).documents[5].full_text == "Chloroplasts\n"


def test_non_object_line(beir):
    lines = [json.dumps(r) for r in corpus_rows()]
    lines[3] = json.dumps(["vol4", "a list, not an object"])
    write_corpus_lines(beir, lines)
    with pytest.raises(DataError, match="expected a JSON object") as err:
        load_beir(beir)
    assert_names(err.value, beir / "corpus.jsonl", 4)


def test_bad_json(beir):
    lines = [json.dumps(r) for r in corpus_rows()]
    lines[1] = '{"_id": "vol2", "text": "unterminated'
    write_corpus_lines(beir, lines)
    with pytest.raises(DataError, match="not valid JSON") as err:
        load_beir(beir)
    assert_names(err.value, beir / "corpus.jsonl", 2)


def test_blank_lines_are_skipped_but_counted(beir):
    lines = [json.dumps(r) for r in corpus_rows()]
    lines[2:2] = ["", "   "]
    lines[6] = "{oops"  # file line 7
    write_corpus_lines(beir, lines)
    with pytest.raises(DataError) as err:
        load_beir(beir)
    assert_names(err.value, beir / "corpus.jsonl", 7)


def test_undecodable_bytes_in_corpus(beir):
    path = beir / "corpus.jsonl"
    data = path.read_bytes().split(b"\n")
    data[2] = b'{"_id": "vol3", "text": "ash \xff cloud"}'
    path.write_bytes(b"\n".join(data))
    with pytest.raises(DataError, match="not valid UTF-8") as err:
        load_beir(beir)
    assert_names(err.value, path, 3)


def test_undecodable_bytes_in_qrels(beir):
    path = beir / "qrels" / "test.tsv"
    path.write_bytes(b"query-id\tcorpus-id\tscore\nq1\tvol1\t1\nq2\tpho\xff1\t1\n")
    with pytest.raises(DataError, match="not valid UTF-8") as err:
        load_beir(beir)
    assert_names(err.value, path, 3)


@pytest.mark.parametrize(
    "row, field, problem",
    [
        ("q1\tnope\t1", "corpus-id", "unknown document id 'nope'"),
        ("q9\tvol1\t1", "query-id", "unknown query id 'q9'"),
        ("q1\tvol1\thigh", "score", "score 'high' is not an integer"),
        ("q1\tvol1", None, "expected 3 tab-separated columns"),
    ],
)
def test_bad_qrels_row(beir, row, field, problem):
    path = beir / "qrels" / "test.tsv"
    path.write_text(f"query-id\tcorpus-id\tscore\nq1\tvol1\t2\n{row}\n")
    with pytest.raises(DataError, match=problem) as err:
        load_beir(beir)
    assert_names(err.value, path, 3, field)


@pytest.mark.parametrize("missing", ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"])
def test_missing_file(beir, missing):
    (beir / missing).unlink()
    with pytest.raises(DataError, match="file not found") as err:
        load_beir(beir)
    assert_names(err.value, beir / missing)


def test_missing_folder(tmp_path):
    with pytest.raises(DataError, match="not a folder") as err:
        load_beir(tmp_path / "nowhere")
    assert_names(err.value, tmp_path / "nowhere")


def test_split_without_judged_queries(beir):
    with pytest.raises(DataError, match="file not found"):
        load_beir(beir, "train")
    (beir / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\n")
    with pytest.raises(DataError, match="no query of queries.jsonl is judged in split 'train'") as err:
        load_beir(beir, "train")
    assert_names(err.value, beir / "qrels" / "train.tsv")


def test_empty_corpus(beir):
    (beir / "corpus.jsonl").write_text("\n")
    with pytest.raises(DataError, match="holds no documents") as err:
        load_beir(beir)
    assert_names(err.value, beir / "corpus.jsonl")


# ---- plain JSONL -----------------------------------------------------------------------------------------------
@pytest.fixture
def jsonl_files(tmp_path):
    corpus = write_jsonl(tmp_path / "docs.jsonl", [
        {"id": "a", "text": "magma rises through the crust"},
        {"_id": "b", "title": "Leaves", "text": "chlorophyll is green"},
        {"id": "c", "contents": "dictionaries map keys to values"},  # pyserini's field name
    ])
    queries = write_jsonl(tmp_path / "queries.jsonl", [{"id": "x", "text": "green leaves", "excluded_ids": ["c"]}])
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("x\tb\t1\n")
    return corpus, queries, qrels


def test_jsonl_loads_id_or__id_and_contents(jsonl_files):
    ds = load_jsonl(*jsonl_files)
    assert ds.name == f"{jsonl_files[0].parent.name}/docs"  # the folder and the file: two corpus.jsonl differ
    assert ds.doc_ids == ["a", "b", "c"]
    assert ds.documents[1].title == "Leaves"
    assert ds.documents[2].text == "dictionaries map keys to values"
    assert ds.queries[0].excluded_ids == frozenset({"c"})
    assert ds.qrels == {"x": {"b": 1}}


def test_jsonl_corpus_only(jsonl_files):
    ds = load_jsonl(jsonl_files[0])
    assert ds.queries == [] and ds.qrels == {}


def test_jsonl_errors(tmp_path, jsonl_files):
    corpus, queries, qrels = jsonl_files
    for row, field in (({"id": "a b", "text": "x"}, "id"), ({"id": "a", "title": "\udc00", "text": "x"}, "title")):
        write_jsonl(corpus, [{"id": "ok", "text": "x"}, row])
        with pytest.raises(DataError, match="whitespace|surrogate") as err:
            load_jsonl(corpus)
        assert_names(err.value, corpus, 2, field)

    write_jsonl(corpus, [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}])
    with pytest.raises(DataError, match="duplicate id 'a'") as err:
        load_jsonl(corpus)
    assert_names(err.value, corpus, 2, "id")

    write_jsonl(corpus, [{"id": "a", "text": ""}])
    with pytest.raises(DataError, match="empty") as err:
        load_jsonl(corpus)
    assert_names(err.value, corpus, 1, "text")

    write_jsonl(corpus, [{"id": "a", "text": "x"}])
    qrels.write_text("x\tzzz\t1\n")
    with pytest.raises(DataError, match="unknown document id 'zzz'") as err:
        load_jsonl(corpus, queries, qrels)
    assert_names(err.value, qrels, 1, "corpus-id")

    with pytest.raises(DataError, match="file not found"):
        load_jsonl(tmp_path / "absent.jsonl")


# ---- BRIGHT from a local copy in the hub's layout --------------------------------------------------------------
BRIGHT_DOCS = [
    {"id": "biology/Photosynthesis_0.txt", "content": "Photosynthesis converts light energy into chemical energy."},
    {"id": "biology/Photosynthesis_1.txt", "content": "The light reactions happen in the thylakoid membranes."},
    {"id": "biology/Leaf_0.txt", "content": "Leaves change colour in autumn when chlorophyll breaks down."},
    {"id": "biology/Mitochondria_0.txt", "content": "Mitochondria produce ATP through cellular respiration."},
]
BRIGHT_LONG = [
    {"id": "biology/Photosynthesis.txt", "content": " ".join(d["content"] for d in BRIGHT_DOCS[:2])},
    {"id": "biology/Leaf.txt", "content": BRIGHT_DOCS[2]["content"]},
    {"id": "biology/Mitochondria.txt", "content": BRIGHT_DOCS[3]["content"]},
]


def bright_example(qid, query, gold, gold_long, excluded):
    return {
        "id": qid, "query": query, "reasoning": "", "gold_answer": "", "gold_ids": gold,
        "gold_ids_long": gold_long, "excluded_ids": excluded,
    }


BRIGHT_EXAMPLES = [
    bright_example("0", "Why do plants need light?",
                   ["biology/Photosynthesis_0.txt", "biology/Photosynthesis_1.txt"],
                   ["biology/Photosynthesis.txt"], ["N/A"]),
    bright_example("1", "Why are leaves red in autumn?\nI saw it in Canada.", ["biology/Leaf_0.txt"],
                   ["biology/Leaf.txt"], ["biology/Mitochondria_0.txt"]),
]


def write_bright(root: Path, task: str = "biology", documents=BRIGHT_DOCS, long_documents=BRIGHT_LONG,
                 examples=BRIGHT_EXAMPLES) -> Path:
    """A local copy in the layout of the hub repository xlangai/BRIGHT: <config>/<task>-*.parquet."""
    import datasets

    for config, rows in (("documents", documents), ("long_documents", long_documents), ("examples", examples)):
        (root / config).mkdir(parents=True, exist_ok=True)
        datasets.Dataset.from_list(rows).to_parquet(str(root / config / f"{task}-00000-of-00001.parquet"))
    return root


@pytest.fixture
def bright_root(tmp_path, monkeypatch):
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets-cache")
    return write_bright(tmp_path / "BRIGHT")


def test_bright_local_copy(bright_root):
    ds = load_bright("biology", source=str(bright_root))
    assert ds.name == "bright/biology"
    assert ds.doc_ids == [d["id"] for d in BRIGHT_DOCS]
    assert [q.id for q in ds.queries] == ["0", "1"]
    assert ds.queries[0].excluded_ids == frozenset()  # the "N/A" sentinel is not an id
    assert ds.queries[1].excluded_ids == frozenset({"biology/Mitochondria_0.txt"})
    assert ds.qrels == {"0": {"biology/Photosynthesis_0.txt": 1, "biology/Photosynthesis_1.txt": 1},
                        "1": {"biology/Leaf_0.txt": 1}}


@pytest.fixture
def bright_hub(tmp_path, monkeypatch):
    """xlangai/BRIGHT at two revisions, each a local copy in the hub's layout; datasets.load_dataset serves a hub
    name from the copy of the revision it is asked for (nothing is downloaded), every other call as it is."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets-cache")
    more = BRIGHT_EXAMPLES + [bright_example("2", "Where is ATP made?", ["biology/Mitochondria_0.txt"],
                                             ["biology/Mitochondria.txt"], ["N/A"])]
    copies = {"main": write_bright(tmp_path / "main"), "0f3c2a1": write_bright(tmp_path / "0f3c2a1", examples=more)}
    real, asked = datasets.load_dataset, []

    def load_dataset(path, name=None, split=None, revision=None, **kwargs):
        if path != "xlangai/BRIGHT":
            return real(path, name, split=split, **kwargs)
        asked.append((name, split, revision))
        files = sorted(str(f) for f in (copies[revision or "main"] / name).glob(f"{split}-*.parquet"))
        return real("parquet", data_files=files, split="train")

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return asked


def test_bright_spec_pins_a_revision_of_the_hub_dataset(bright_hub, bright_root):
    assert [q.id for q in load_dataset("bright:biology").queries] == ["0", "1"]
    assert [q.id for q in load_dataset("bright:biology@0f3c2a1").queries] == ["0", "1", "2"]  # that revision's examples
    assert [q.id for q in load_dataset("bright:biology:long@xlangai/BRIGHT@0f3c2a1").queries] == ["0", "1", "2"]
    assert bright_hub == [("documents", "biology", None), ("examples", "biology", None),
                          ("documents", "biology", "0f3c2a1"), ("examples", "biology", "0f3c2a1"),
                          ("long_documents", "biology", "0f3c2a1"), ("examples", "biology", "0f3c2a1")]
    assert len(load_dataset(f"bright:biology@{bright_root}").queries) == 2  # '@<folder>' is still a local copy
    with pytest.raises(DataError, match="a local copy has one version; revision 'abc' pins a hub dataset"):
        load_dataset(f"bright:biology@{bright_root}@abc")


def test_bright_long_documents(bright_root):
    ds = load_bright("biology", long_documents=True, source=str(bright_root))
    assert ds.name == "bright/biology:long"
    assert len(ds.documents) == len(BRIGHT_LONG)
    assert ds.qrels == {"0": {"biology/Photosynthesis.txt": 1}, "1": {"biology/Leaf.txt": 1}}


def test_bright_gold_id_not_in_documents(tmp_path, bright_root):
    examples = BRIGHT_EXAMPLES + [bright_example("2", "Where is ATP made?", ["biology/Ribosome_0.txt"], [], ["N/A"])]
    write_bright(bright_root, examples=examples)
    with pytest.raises(DataError, match="gold id 'biology/Ribosome_0.txt' is not in the biology documents") as err:
        load_bright("biology", source=str(bright_root))
    assert_names(err.value, f"{bright_root}:biology", 3, "gold_ids")


def test_bright_gold_id_also_excluded(bright_root):
    examples = [bright_example("0", "q", ["biology/Leaf_0.txt"], [], ["biology/Leaf_0.txt"])]
    write_bright(bright_root, examples=examples)
    with pytest.raises(DataError, match="also excluded") as err:
        load_bright("biology", source=str(bright_root))
    assert_names(err.value, f"{bright_root}:biology", 1, "excluded_ids")


def test_bright_duplicate_document_id(bright_root):
    write_bright(bright_root, documents=BRIGHT_DOCS + [BRIGHT_DOCS[1]])
    with pytest.raises(DataError, match="duplicate document id") as err:
        load_bright("biology", source=str(bright_root))
    assert_names(err.value, f"{bright_root}:biology", 5, "id")


def test_bright_missing_task_file_and_unknown_task(bright_root):
    with pytest.raises(DataError, match="no parquet file for task 'economics'") as err:
        load_bright("economics", source=str(bright_root))
    assert_names(err.value, bright_root / "documents")
    with pytest.raises(DataError, match="unknown task 'botany'"):
        load_bright("botany", source=str(bright_root))


# ---- dataset specs ---------------------------------------------------------------------------------------------
def test_spec_beir_forms(beir):
    assert load_dataset(str(beir)).name == "tiny/test"
    assert load_dataset(f"beir:{beir}").name == "tiny/test"
    (beir / "qrels" / "dev.tsv").write_text("q2\tpho1\t1\n")
    ds = load_dataset(f"beir:{beir}:dev")
    assert ds.name == "tiny/dev" and [q.id for q in ds.queries] == ["q2"]


def test_spec_allow_empty_docs(beir):
    write_jsonl(beir / "corpus.jsonl", corpus_rows({0: {"_id": "vol1", "text": ""}}))
    with pytest.raises(DataError):
        load_dataset(f"beir:{beir}")
    assert len(load_dataset(f"beir:{beir}", allow_empty_docs=True).documents) == len(DOCS)


def test_spec_jsonl(jsonl_files):
    corpus, queries, qrels = jsonl_files
    assert load_dataset(f"jsonl:{corpus}").doc_ids == ["a", "b", "c"]
    assert load_dataset(f"jsonl:{corpus},{queries},{qrels}").qrels == {"x": {"b": 1}}


def test_spec_bright(bright_root):
    assert load_dataset(f"bright:biology@{bright_root}").name == "bright/biology"
    assert load_dataset(f"bright:biology:long@{bright_root}").name == "bright/biology:long"
    with pytest.raises(DataError, match="unknown BRIGHT variant 'short'"):
        load_dataset(f"bright:biology:short@{bright_root}")


def test_spec_stdlib_docs():
    ds = load_dataset("stdlib-docs")
    assert len(ds.queries) == 5 and ds.qrels == {}
    assert "json.dumps" in ds.doc_index
    assert len(set(ds.doc_ids)) == len(ds.doc_ids)


@pytest.mark.parametrize("spec", ["no-such-folder", "mystery:thing", "bright:", "jsonl:", "beir:",
                                  "jsonl:a.jsonl,b.jsonl,c.tsv,d.tsv"])
def test_bad_spec(spec):
    with pytest.raises(DataError) as err:
        load_dataset(spec)
    assert str(err.value).startswith(spec)


def test_spec_beir_missing_folder(tmp_path):
    with pytest.raises(DataError, match="not a folder"):
        load_dataset(f"beir:{tmp_path / 'absent'}")


# ---- the real corpora in ../shared/data ------------------------------------------------------------------------
def test_real_scifact(shared_data):
    ds = load_beir(shared_data / "scifact", "test")
    assert (len(ds.documents), len(ds.queries)) == (5183, 300)
    assert sum(len(v) for v in ds.qrels.values()) == 339


def test_real_cranfield_needs_allow_empty_docs(shared_data):
    with pytest.raises(DataError, match="allow-empty-docs") as err:
        load_beir(shared_data / "cranfield")
    assert err.value.field == "text" and err.value.line is not None
    ds = load_beir(shared_data / "cranfield", allow_empty_docs=True)
    assert (len(ds.documents), len(ds.queries)) == (1400, 225)


def test_bright_from_an_unreachable_hub_is_one_line(capsys, tmp_path):
    """Was: ``bright:`` while the hub could not be reached ended in a ConnectionError traceback. (The tests run with
    HF_HUB_OFFLINE=1, which datasets meets exactly as an unreachable hub: ConnectionError, no cached copy.)"""
    from garen_infer.doors.cli import main

    with pytest.raises(DataError,
                       match=r"^bright:biology: cannot load nobody/no-such-bright \(documents\) from the "
                             r"Hugging Face hub: .*or name a local copy: bright:biology@<folder>$"):
        load_bright("biology", source="nobody/no-such-bright")
    code = main(["index", "--dataset", "bright:biology@nobody/no-such-bright", "--out", str(tmp_path / "idx")])
    err = one_error_line(capsys, "garen-infer index")
    assert code != 0 and "cannot load nobody/no-such-bright" in err and not (tmp_path / "idx").exists()


def test_judgments_are_read_without_the_corpus(tmp_path, bright_root):
    """What scoring a run needs, the corpus file gone: the same name, queries, excluded ids and judgements."""
    beir = write_beir(tmp_path / "tiny")
    plain = tmp_path / "plain"
    write_jsonl(plain / "queries.jsonl", [{"id": q, "text": x} for q, x, _ in QUERIES])
    (plain / "qrels.tsv").write_text("".join(f"{q}\t{d}\t{r}\n" for q, d, r in QRELS))
    write_jsonl(plain / "corpus.jsonl", [{"id": d, "text": x} for d, _, x in DOCS])
    specs = {f"beir:{beir}": beir / "corpus.jsonl",
             f"jsonl:{plain}/corpus.jsonl,{plain}/queries.jsonl,{plain}/qrels.tsv": plain / "corpus.jsonl",
             f"bright:biology@{bright_root}": bright_root / "documents"}
    for spec, corpus in specs.items():
        full = load_dataset(spec)
        assert full.documents and not full.judgments_only
        shutil.rmtree(corpus) if corpus.is_dir() else corpus.unlink()
        with pytest.raises(DataError):
            load_dataset(spec)
        judgments = load_judgments(spec)
        assert judgments.judgments_only and judgments.documents == []
        assert (judgments.name, judgments.queries, judgments.qrels) == (full.name, full.queries, full.qrels)
    assert any(q.excluded_ids for q in load_judgments(f"bright:biology@{bright_root}").queries)


# ---- gzip is recognised by its bytes, never by the name: a run or qrels file of any name reads the same ----------
RUN_LINES = "q1 Q0 vol1 1 2.5 t\nq1 Q0 vol2 2 1.5 t\n"


@pytest.mark.parametrize("name", ["run.trec", "run.trec.gz", "run.txt", "run"])
def test_a_gzipped_run_is_read_by_its_bytes_whatever_its_name(tmp_path, name):
    (tmp_path / name).write_bytes(gzip.compress(RUN_LINES.encode()))
    assert read_run(tmp_path / name) == {"q1": {"vol1": 2.5, "vol2": 1.5}}


def test_a_plain_run_named_gz_is_read_as_plain_text(tmp_path):
    (tmp_path / "run.trec.gz").write_text(RUN_LINES)
    assert read_run(tmp_path / "run.trec.gz") == {"q1": {"vol1": 2.5, "vol2": 1.5}}


@pytest.mark.parametrize("name", ["qrels.tsv", "qrels.tsv.gz", "qrels"])
def test_gzipped_qrels_are_read_by_their_bytes(tmp_path, name):
    data = b"query-id\tcorpus-id\tscore\nq1\tvol1\t2\n"
    (tmp_path / name).write_bytes(gzip.compress(data) if name != "qrels.tsv.gz" else data)
    assert read_qrels_tsv(tmp_path / name, None, {"q1"}) == {"q1": {"vol1": 2}}
