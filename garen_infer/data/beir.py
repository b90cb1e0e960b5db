"""BEIR folders: corpus.jsonl (_id, title, text), queries.jsonl (_id, text), qrels/<split>.tsv."""

from __future__ import annotations

from pathlib import Path

from garen_infer.data.dataset import Dataset, Document, Query
from garen_infer.data.validate import UniqueIds, read_jsonl, read_qrels_tsv, require_id, require_text
from garen_infer.errors import DataError


def read_corpus(path: Path, allow_empty: bool = False) -> list[Document]:
    """Read corpus.jsonl. A document with neither title nor text is an error unless ``allow_empty`` keeps it
    (Cranfield has two such documents in its source, and its qrels judge one of them)."""
    seen, docs = UniqueIds(path, "_id"), []
    for line, obj in read_jsonl(path):
        doc_id = require_id(obj, "_id", path, line)
        seen.add(doc_id, line)
        title = require_text(obj, "title", path, line, allow_empty=True) if obj.get("title") is not None else ""
        text = require_text(obj, "text", path, line, allow_empty=True)
        if not text.strip() and not title.strip():
            if not allow_empty:
                raise DataError(path,
                                "empty (and so is 'title'); pass --allow-empty-docs to keep such documents",
                                line, "text")
        docs.append(Document(doc_id, text, title))
    if not docs:
        raise DataError(path, "the corpus holds no documents")
    return docs


def read_queries(path: Path) -> list[Query]:
    seen, queries = UniqueIds(path, "_id"), []
    for line, obj in read_jsonl(path):
        qid = require_id(obj, "_id", path, line)
        seen.add(qid, line)
        excluded = obj.get("excluded_ids") or []
        if not isinstance(excluded, list):
            raise DataError(path, "expected a list of ids", line, "excluded_ids")
        queries.append(Query(qid, require_text(obj, "text", path, line), frozenset(map(str, excluded))))
    return queries


def load_beir(folder: str | Path, split: str = "test", allow_empty_docs: bool = False,
              documents: bool = True) -> Dataset:
    """Load a BEIR folder; only the queries judged in ``qrels/<split>.tsv`` are kept. Without ``documents``,
    corpus.jsonl is not read (it need not exist)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(folder, "not a folder (expected a BEIR folder with corpus.jsonl, queries.jsonl, qrels/)")
    docs = read_corpus(folder / "corpus.jsonl", allow_empty_docs) if documents else []
    queries = read_queries(folder / "queries.jsonl")
    qrels_path = folder / "qrels" / f"{split}.tsv"
    qrels = read_qrels_tsv(qrels_path, {d.id for d in docs} if documents else None, {q.id for q in queries})
    judged = [q for q in queries if q.id in qrels]
    if not judged:
        raise DataError(qrels_path, f"no query of queries.jsonl is judged in split '{split}'")
    return Dataset(f"{folder.name}/{split}", docs, judged, qrels)
