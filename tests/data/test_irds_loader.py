"""``irds:<id>`` datasets: local collections in ir_datasets' own formats (its BEIR and BRIGHT readers over files
written here, registered as ir_datasets' tests register theirs), loaded offline and checked like every loader."""

from __future__ import annotations

import json
import uuid

import pytest
from conftest import DOCS, QRELS, QUERIES, write_beir, write_jsonl

from garen_infer.data import load_dataset, load_judgments
from garen_infer.data.irds import _name
from garen_infer.doors.cli import main
from garen_infer.errors import DataError


@pytest.fixture
def irds_home(tmp_path, monkeypatch):
    """ir_datasets keeps its document stores under $IR_DATASETS_HOME: a fresh one per test, nothing in ~."""
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds-home"))
    return tmp_path / "irds-home"


def register(dataset) -> str:
    import ir_datasets

    dataset_id = f"garen-test/{uuid.uuid4().hex[:8]}"
    ir_datasets.registry.register(dataset_id, dataset)
    return dataset_id


def register_beir(folder) -> str:
    """The BEIR folder as ir_datasets' beir module reads BEIR collections (title + text documents)."""
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.datasets.beir import BeirDocs, BeirQrels, BeirQueries, BeirTitleDoc
    from ir_datasets.formats import GenericQuery
    from ir_datasets.util import LocalDownload

    name = f"local-{uuid.uuid4().hex[:8]}"
    return register(Dataset(
        BeirDocs(name, LocalDownload(folder / "corpus.jsonl"), BeirTitleDoc),
        BeirQueries(name, LocalDownload(folder / "queries.jsonl"), GenericQuery),
        BeirQrels(LocalDownload(folder / "qrels" / "test.tsv"), qrels_defs={}),
    ))


def test_a_beir_collection_through_ir_datasets_is_the_beir_loaders(beir_dir, tiny_dataset, irds_home):
    dataset = load_dataset(f"irds:{register_beir(beir_dir)}")
    assert dataset.fingerprint() == tiny_dataset.fingerprint()  # same documents, titles and texts: an index serves both
    assert dataset.qrels == tiny_dataset.qrels
    assert [(q.id, q.text) for q in dataset.queries] == [(q.id, q.text) for q in tiny_dataset.queries]


def write_bright(folder, examples, documents=None):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    documents = documents if documents is not None else [{"id": d, "content": f"{t}. {x}"} for d, t, x in DOCS]
    pq.write_table(pa.Table.from_pylist(documents), folder / "documents.parquet")
    rows = [{"reasoning": "", "gold_answer": "", "gold_ids_long": [], **row} for row in examples]
    pq.write_table(pa.Table.from_pylist(rows), folder / "examples.parquet")
    return folder


def register_bright(folder) -> str:
    """ir_datasets' BRIGHT readers (documents and examples as parquet, excluded ids as qrels of -100)."""
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.datasets.bright import BrightDocs, BrightQrels, BrightQueries
    from ir_datasets.util import LocalDownload

    examples = LocalDownload(folder / "examples.parquet")
    return register(Dataset(BrightDocs("local", LocalDownload(folder / "documents.parquet")),
                            BrightQueries(examples), BrightQrels(examples)))


def test_brights_excluded_ids_become_the_querys_exclusions(tmp_path, irds_home):
    folder = write_bright(tmp_path / "bright", [
        {"id": "b1", "query": "magma rising through the crust", "gold_ids": ["vol1", "vol4"],
         "excluded_ids": ["vol2", "N/A"]},
        {"id": "b2", "query": "chlorophyll in leaves", "gold_ids": ["pho1"], "excluded_ids": ["N/A"]},
    ])
    dataset = load_dataset(f"irds:{register_bright(folder)}")
    queries = {q.id: q for q in dataset.queries}
    assert queries["b1"].excluded_ids == {"vol2"} and queries["b2"].excluded_ids == frozenset()
    assert dataset.qrels == {"b1": {"vol1": 1, "vol4": 1}, "b2": {"pho1": 1}}  # -100 is not a grade
    assert dataset.documents[0].text.startswith("Volcanic eruptions.")


def test_judgments_are_read_without_the_documents(tmp_path, irds_home):
    """What eval and compare read: queries, judgements and excluded ids; the documents file may be gone."""
    folder = write_bright(tmp_path / "bright", [
        {"id": "b1", "query": "magma rising", "gold_ids": ["vol1"], "excluded_ids": ["vol2"]}])
    dataset_id = register_bright(folder)
    full = load_dataset(f"irds:{dataset_id}")
    (folder / "documents.parquet").unlink()
    judgments = load_judgments(f"irds:{dataset_id}")
    assert judgments.judgments_only
    assert (judgments.name, judgments.queries, judgments.qrels) == (full.name, full.queries, full.qrels)


def test_brights_task_names_follow_the_bright_loader():
    assert _name("bright/earth-science-long") == "bright/earth_science:long"
    assert _name("bright/biology") == "bright/biology"
    assert _name("beir/scifact/test") == "beir/scifact/test"


def test_bad_records_are_refused_naming_the_record(tmp_path, irds_home):
    folder = write_beir(tmp_path / "dup", docs=[*DOCS, DOCS[3]])
    with pytest.raises(DataError,
                       match=r"^irds:garen-test/\w+, line 13, field 'doc_id': duplicate document id 'vol4' "
                       r"\(first at document 4\)$"):
        load_dataset(f"irds:{register_beir(folder)}")

    folder = write_beir(tmp_path / "unknown", qrels=[*QRELS, ("q4", "py9", 1)])
    with pytest.raises(DataError, match=r"line 9, field 'doc_id': judgement of unknown document id 'py9'$"):
        load_dataset(f"irds:{register_beir(folder)}")

    folder = write_beir(tmp_path / "empty")
    write_jsonl(folder / "corpus.jsonl", [{"_id": d, "title": "", "text": "" if d == "py1" else x} for d, _, x in DOCS])
    dataset_id = register_beir(folder)
    with pytest.raises(DataError, match=r"line 9, field 'text': empty .*--allow-empty-docs"):
        load_dataset(f"irds:{dataset_id}")
    assert len(load_dataset(f"irds:{dataset_id}", allow_empty_docs=True).documents) == 12

    folder = write_bright(tmp_path / "both",
                          [{"id": "b1", "query": "lava", "gold_ids": ["vol1"], "excluded_ids": ["vol1"]}])
    with pytest.raises(DataError, match="'vol1' is both relevant to and excluded for query 'b1'"):
        load_dataset(f"irds:{register_bright(folder)}")


def test_an_unknown_id_is_one_line_from_the_cli(tmp_path, capsys, irds_home):
    assert main(["index", "--dataset", "irds:no-such/collection", "--out", str(tmp_path / "i")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("garen-infer index: error: irds:no-such/collection: ir_datasets knows no dataset "
                          "'no-such/collection'")
    assert "\n" not in err and not (tmp_path / "i" / "manifest.json").exists()


def test_an_id_without_documents_is_refused(irds_home):
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.formats import TsvQueries
    from ir_datasets.util import LocalDownload

    queries = irds_home / "q.tsv"
    queries.parent.mkdir(parents=True, exist_ok=True)
    queries.write_text("q1\tlava\n")
    with pytest.raises(DataError, match="has no documents"):
        load_dataset(f"irds:{register(Dataset(TsvQueries(LocalDownload(queries))))}")


def test_a_collection_whose_files_cannot_be_downloaded_is_one_line(tmp_path, capsys, irds_home):
    """As irds:cranfield offline without its files: every download source fails (here a host that cannot resolve)."""
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.datasets.beir import BeirDocs, BeirQueries, BeirTitleDoc
    from ir_datasets.formats import GenericQuery
    from ir_datasets.util import Download, RequestsDownload

    name = f"gone-{uuid.uuid4().hex[:8]}"
    gone = Download([RequestsDownload("http://garen-test.invalid/corpus.jsonl"), RequestsDownload("http://mirror.garen-test.invalid/c")])
    dataset_id = register(Dataset(BeirDocs(name, gone, BeirTitleDoc), BeirQueries(name, gone, GenericQuery)))
    assert main(["index", "--dataset", f"irds:{dataset_id}", "--out", str(tmp_path / "i")]) == 2
    err = capsys.readouterr().err  # ir_datasets logs each failed source first
    line = err.strip().splitlines()[-1]
    assert "Traceback" not in err and line.startswith("garen-infer index: error: ")
    assert (
        f"irds:{dataset_id}: ir_datasets could not read or download the collection's files (every download "
        "source failed"
        in line
    )
    assert "$IR_DATASETS_HOME" in line and not (tmp_path / "i" / "manifest.json").exists()


def test_an_index_and_a_run_over_an_irds_dataset(beir_dir, tmp_path, irds_home, capsys):
    spec = f"irds:{register_beir(beir_dir)}"
    preset = tmp_path / "bm25.yaml"
    preset.write_text("index:\n  bm25: {variant: bm25s}\n")
    assert main(["index", "--dataset", spec, "--preset", str(preset), "--out", str(tmp_path / "idx")]) == 0
    assert main(["run", "--dataset", spec, "--preset", str(preset), "--index", str(tmp_path / "idx"),
                 "--method", "bm25",
                 "--out", str(tmp_path / "run"), "--no-cache"]) == 0
    capsys.readouterr()
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["queries"] == len(QUERIES)
