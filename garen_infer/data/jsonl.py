"""Plain JSONL: a corpus file with id/text (title optional), a queries file, optional qrels TSV.

Accepts ``id`` or ``_id`` so hand-written files and BEIR exports both load, and ``contents`` for ``text`` (Pyserini's
JSONL). The user's table of every field is docs/running.md's "Datasets"; tests/data/test_jsonl_fields.py loads its
example, so the two cannot drift apart.
"""

from __future__ import annotations

from pathlib import Path

from garen_infer.data.dataset import Dataset, Document, Query
from garen_infer.data.validate import UniqueIds, read_jsonl, read_qrels_tsv, require_id, require_text
from garen_infer.errors import DataError


def _id_key(obj: dict) -> str:
    return "_id" if "_id" in obj else "id"


def load_jsonl(corpus: str | Path, queries: str | Path | None = None, qrels: str | Path | None = None,
               documents: bool = True) -> Dataset:
    """Without ``documents`` the corpus file is not read (it need not exist); it still names the dataset."""
    corpus, docs = Path(corpus), []
    seen = UniqueIds(corpus, "id")
    for line, obj in read_jsonl(corpus) if documents else ():
        doc_id = require_id(obj, _id_key(obj), corpus, line)
        seen.add(doc_id, line)
        text_key = "text" if "text" in obj or "contents" not in obj else "contents"
        title = require_text(obj, "title", corpus, line, allow_empty=True) if obj.get("title") is not None else ""
        docs.append(Document(doc_id, require_text(obj, text_key, corpus, line), title))
    if documents and not docs:
        raise DataError(corpus, "the corpus holds no documents")
    query_list: list[Query] = []
    if queries is not None:
        queries = Path(queries)
        seen_q = UniqueIds(queries, "id")
        for line, obj in read_jsonl(queries):
            qid = require_id(obj, _id_key(obj), queries, line)
            seen_q.add(qid, line)
            query_list.append(Query(qid, require_text(obj, "text", queries, line),
                                    frozenset(map(str, obj.get("excluded_ids") or []))))
    judgements = {}
    if qrels is not None:
        doc_ids = {d.id for d in docs} if documents else None
        judgements = read_qrels_tsv(Path(qrels), doc_ids, {q.id for q in query_list})
    return Dataset(jsonl_name(corpus), docs, query_list, judgements)


def jsonl_name(corpus: Path) -> str:
    """``<folder>/<file stem>`` of the corpus file (``scifact/corpus``): two datasets whose corpus files share a
    name (``corpus.jsonl``) are told apart in run folders and reports."""
    folder = corpus.resolve().parent.name
    return f"{folder}/{corpus.stem}" if folder else corpus.stem
