"""A JSONL dataset as the user docs describe it: the example in docs/running.md ("Datasets") loads as it says, its
fields are the ones the loader reads, and ``--dataset``'s help names them."""

from __future__ import annotations

import re

import pytest
from conftest import REPO

from garen_infer.data import load_dataset
from garen_infer.doors.cli import main
from garen_infer.errors import DataError

DOCS = REPO / "docs" / "running.md"


def documented_example() -> dict[str, list[str]]:
    """The lines of the example block under the docs' marker, by file name."""
    text = DOCS.read_text(encoding="utf-8")
    block = text.split("<!-- jsonl-example", 1)[1].split("```", 2)[1]
    files: dict[str, list[str]] = {}
    for line in block.strip().splitlines():
        name, _, content = line.partition(":")
        files.setdefault(name.strip(), []).append(content.strip())
    return files


def write_example(folder) -> str:
    for name, lines in documented_example().items():
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return f"jsonl:{folder / 'corpus.jsonl'},{folder / 'queries.jsonl'},{folder / 'qrels.tsv'}"


def test_the_documented_example_loads_as_documented(tmp_path):
    dataset = load_dataset(write_example(tmp_path))
    assert dataset.name == f"{tmp_path.name}/corpus"  # <folder>/<corpus file stem>
    assert [(d.id, d.title) for d in dataset.documents] == [("d1", "Volcanoes"), ("d2", "")]
    assert dataset.documents[0].full_text.startswith("Volcanoes")  # the title is read with the text
    [query] = dataset.queries
    assert (query.id, query.text, query.excluded_ids) == ("q1", "why do volcanoes erupt", frozenset({"d2"}))
    assert dataset.qrels == {"q1": {"d1": 1}}


def test_the_alternative_names_in_the_table_load_the_same(tmp_path):
    (tmp_path / "corpus.jsonl").write_text('{"_id": 7, "contents": "hello world", "source": "ignored"}\n')
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "hello"}\n')
    (tmp_path / "qrels.tsv").write_text("q1 0 7 2\n")  # TREC's four columns
    dataset = load_dataset(f"jsonl:{tmp_path / 'corpus.jsonl'},{tmp_path / 'queries.jsonl'},{tmp_path / 'qrels.tsv'}")
    assert [(d.id, d.text) for d in dataset.documents] == [("7", "hello world")] and dataset.qrels == {"q1": {"7": 2}}


def test_the_table_names_every_field_the_loader_needs(tmp_path):
    table = DOCS.read_text(encoding="utf-8").split("**JSONL datasets**", 1)[1].split("Other fields are ignored", 1)[0]
    named = set(re.findall(r"^\| \w+ \| `([\w-]+)`", table, flags=re.M))
    assert named == {"id", "text", "title", "excluded_ids", "query-id"}
    (tmp_path / "corpus.jsonl").write_text('{"id": "d1", "body": "no text field"}\n')
    with pytest.raises(DataError, match="line 1, field 'text': missing"):  # what the table says is required
        load_dataset(f"jsonl:{tmp_path / 'corpus.jsonl'}")


def test_dataset_help_names_the_jsonl_fields(capsys):
    with pytest.raises(SystemExit):
        main(["index", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert ('JSONL lines: corpus {"id", "text", "title" (optional)}, queries {"id", "text", "excluded_ids" '
            '(optional)}; '
            "qrels: TSV query-id corpus-id score (docs/running.md, Datasets)") in help_text
