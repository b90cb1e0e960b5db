"""The corpus_files stage: one file per document, a stable collision-free name per id, a path <-> id table."""

from __future__ import annotations

import json
import subprocess

import pytest

from garen_infer.data.dataset import Dataset, Document, Query
from garen_infer.errors import GarenError
from garen_infer.index.corpus_files import CorpusFiles, file_names
from garen_infer.index.stages import IndexConfig

HOSTILE_IDS = [
    "4983", "doc-1.v2", "Case", "case",  # plain; two that differ only in case (a clash on macOS / Windows)
    "a/b", "../../etc/passwd", "..", ".", "", " spaced id ", "naïve café", "中文文档", "x" * 300,
    "a~b", "a.txt", "a", "-rf", "$(reboot)", "line\nbreak", "tab\tid", "C:\\windows\\file",
]


def test_names_are_unique_safe_and_stable():
    names = file_names(HOSTILE_IDS)
    assert len(set(n.casefold() for n in names)) == len(HOSTILE_IDS)  # unique, even on a case-insensitive disk
    for name in names:
        assert "/" not in name and "\\" not in name and "\n" not in name and "\t" not in name
        assert not name.startswith((".", "-")) and len(name.encode()) <= 100
        assert name.isascii() and name.endswith(".txt")
    by_id = dict(zip(HOSTILE_IDS, names))
    assert by_id["4983"] == "4983.txt" and by_id["doc-1.v2"] == "doc-1.v2.txt" and by_id["a.txt"] == "a.txt.txt"
    assert "~" in by_id["Case"] and "~" in by_id["case"]  # case twins both hashed: neither wins by order
    assert by_id["a/b"].startswith("a_b~") and by_id["naïve café"].startswith("naive_cafe~")
    # a name depends on the id (and on which ids exist), not on the order of the corpus
    assert dict(zip(reversed(HOSTILE_IDS), file_names(list(reversed(HOSTILE_IDS))))) == by_id
    assert file_names(HOSTILE_IDS) == names


def test_build_writes_every_document_and_the_table(tmp_path):
    from garen_infer.index.folder import IndexFolder

    docs = [Document(i, f"text of {i!r} with \x00 a NUL", title=f"title {k}") for k, i in enumerate(HOSTILE_IDS[:-3])]
    dataset = Dataset("hostile", docs, [Query("q", "text")])
    index = IndexFolder.build(dataset, tmp_path / "index", IndexConfig.from_dict({"corpus_files": {}}),
                              log=lambda *_: None)
    files = CorpusFiles.open(index)
    assert files.doc_ids == dataset.doc_ids
    assert len(list(files.docs_dir.iterdir())) == len(docs)  # nothing written outside docs/ or twice
    for row, doc in enumerate(docs):
        path = files.root / files.paths[row]
        assert path.parent == files.docs_dir
        assert path.read_text(encoding="utf-8") == doc.full_text.replace("\x00", " ") + "\n"
        assert files.row_of_name[files.name(row)] == row and files.row_of_id[doc.id] == row
    table = json.loads((files.root / "table.json").read_text(encoding="utf-8"))
    assert [doc_id for doc_id, _ in table] == dataset.doc_ids
    assert index.manifest["stages"]["corpus_files"]["info"]["files"] == len(docs)
    # ripgrep reads every file as text (a NUL byte would make it skip the file as binary)
    from garen_infer.agent.binaries import ripgrep

    found = subprocess.run([ripgrep(), "-l", "NUL", str(files.docs_dir)], capture_output=True, text=True).stdout.split()
    assert len(found) == len(docs)


def test_a_method_needing_the_files_says_how_to_build_them(tiny_index):
    with pytest.raises(GarenError, match="needs the index stage 'corpus_files'"):
        CorpusFiles.open(tiny_index)
