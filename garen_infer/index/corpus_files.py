"""The corpus as plain files, one per document, so ripgrep and the other read-only tools of the RARG agent can
search it (DCI-Agent-Lite exports BRIGHT the same way, one file per document id: Li et al., "Beyond Semantic
Similarity: Rethinking Retrieval for Agentic Search via Direct Corpus Interaction", arXiv 2605.05242).

Stored under ``corpus_files/``:
- ``docs/<name>``: the document's title and text (``Document.full_text``), UTF-8, ending in a newline;
- ``table.json``: ``[[doc id, "docs/<name>"], ...]`` in corpus order, the path <-> id table.

File names are stable (a function of the id alone, plus which other ids exist) and collision-free:
- an id made of ``[A-Za-z0-9._-]`` (starting with a letter or digit, at most 100 characters) keeps its spelling:
  ``4983`` -> ``4983.txt``, unless another id differs from it only in case (case-insensitive filesystems);
- any other id (``/``, ``..``, spaces, unicode, very long) becomes an ASCII slug of at most 60 characters, ``~``
  and 16 hex digits of the id's SHA-256: ``a/b c`` -> ``a_b_c~<hash>.txt``. Plain names never contain ``~``, so the
  two kinds cannot meet; two hashed names that collide anyway (a 64-bit clash) stop the build with a clear error.
NUL bytes, which make ripgrep treat a file as binary and skip it, are written as spaces.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from garen_infer.errors import GarenError
from garen_infer.index.stages import Stage, register
from garen_infer.storage.atomic import atomic_path

if TYPE_CHECKING:
    from garen_infer.data.dataset import Dataset
    from garen_infer.index.open_index import OpenIndex


STAGE = "corpus_files"
DOCS = "docs"
PLAIN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
EXTENSION = re.compile(r"[A-Za-z0-9._-]{0,16}")
SLUG_CHARS = 60
HASH_HEX = 16


@dataclass(frozen=True)
class CorpusFilesParams:
    extension: str = ".txt"  # appended to every file name (DCI exports BRIGHT documents as .txt files)

    def __post_init__(self):
        if not EXTENSION.fullmatch(self.extension):  # a path ("/x", "../x") would write outside docs/
            raise ValueError(f"extension {self.extension!r} must be a file name ending such as '.txt' "
                             "(letters, digits, '.', '_' or '-', at most 16), not a path")


def file_names(doc_ids: list[str], extension: str = ".txt") -> list[str]:
    """One file name per id, in the same order (see the module docstring for the rule)."""
    plain = [bool(PLAIN_ID.fullmatch(i)) for i in doc_ids]
    folded = Counter(i.casefold() for i, ok in zip(doc_ids, plain) if ok)
    names = [
        (i if ok and folded[i.casefold()] == 1 else _hashed_name(i)) + extension for i, ok in zip(doc_ids, plain)
    ]
    clash = [n for n, c in Counter(n.casefold() for n in names).items() if c > 1]
    if clash:
        raise GarenError(f"corpus_files: two document ids map to the file name '{clash[0]}'; rename one of them")
    return names


def _hashed_name(doc_id: str) -> str:
    ascii_text = unicodedata.normalize("NFKD", doc_id).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", ascii_text).lstrip("._-")[:SLUG_CHARS] or "doc"
    return f"{slug}~{hashlib.sha256(doc_id.encode('utf-8')).hexdigest()[:HASH_HEX]}"


def _build(folder: OpenIndex, dataset: Dataset, params: CorpusFilesParams) -> dict:
    start = time.perf_counter()
    ids = dataset.doc_ids
    names = file_names(ids, params.extension)
    size = 0
    with atomic_path(folder.path / STAGE) as tmp:
        (tmp / DOCS).mkdir(parents=True)
        for doc, name in zip(dataset.documents, names):
            data = (doc.full_text.replace("\x00", " ").rstrip("\n") + "\n").encode("utf-8")
            (tmp / DOCS / name).write_bytes(data)
            size += len(data)
        table = [[i, f"{DOCS}/{n}"] for i, n in zip(ids, names)]
        (tmp / "table.json").write_text(json.dumps(table, ensure_ascii=False), encoding="utf-8")
    hashed = sum("~" in n for n in names)
    return {"files": len(names), "bytes": size, "hashed_names": hashed,
            "seconds": round(time.perf_counter() - start, 2)}


register(Stage(STAGE, CorpusFilesParams, _build))


class CorpusFiles:
    """The materialised corpus of an index folder: where its files are and which document each one holds."""

    def __init__(self, root: Path, table: list[list[str]]):
        self.root = Path(root)
        self.doc_ids = [doc_id for doc_id, _ in table]
        self.paths = [path for _, path in table]  # relative to root, by corpus row

    @classmethod
    def open(cls, index: OpenIndex) -> CorpusFiles:
        index.require(STAGE, "the RARG agent (ripgrep over the corpus)")
        root = index.path / STAGE
        table = json.loads((root / "table.json").read_text(encoding="utf-8"))
        if [doc_id for doc_id, _ in table] != index.doc_ids:
            raise GarenError(f"{root}: its table lists other documents than the index; rebuild with --force")
        return cls(root, table)

    @property
    def docs_dir(self) -> Path:
        return self.root / DOCS

    @cached_property
    def row_of_name(self) -> dict[str, int]:
        """Corpus row by file name (``4983.txt``)."""
        return {Path(p).name: row for row, p in enumerate(self.paths)}

    @cached_property
    def row_of_id(self) -> dict[str, int]:
        return {doc_id: row for row, doc_id in enumerate(self.doc_ids)}

    def name(self, row: int) -> str:
        return Path(self.paths[row]).name
