"""Reading JSONL and TSV with checks that point at the offending file, line and field. A byte order mark at the
start of a file (what Windows tools write) is dropped, so it cannot become part of the first id. Run and qrels
files may be gzipped (as PyTerrier's ``save_dir`` writes runs and TREC ships them): recognised by their magic
bytes, whatever the name."""

from __future__ import annotations

import codecs
import csv
import gzip
import json
import re
import zlib
from collections.abc import Iterator
from pathlib import Path

from garen_infer.errors import DataError

LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def require_file(path: Path) -> None:
    """Refuse, naming what is there instead, a path that is not a regular file (missing, a folder, a device)."""
    if path.is_file():
        return
    if path.is_dir():
        raise DataError(path, "a folder, not a file; name a file in it")
    if path.exists():
        raise DataError(path, "not a regular file (a device or a pipe?); name a file")
    raise DataError(path, "file not found")


def read_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """Yield (line number, object) for each non-blank line; undecodable bytes or bad JSON raise DataError."""
    require_file(path)
    with open(path, "rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            if line_no == 1:
                raw = raw.removeprefix(codecs.BOM_UTF8)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise DataError(path, f"bytes are not valid UTF-8 ({err.reason} at byte {err.start})",
                                line_no) from None
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(path, f"not valid JSON ({json_problem(err)})", line_no) from None
            if not isinstance(obj, dict):
                raise DataError(path, "expected a JSON object", line_no)
            yield line_no, obj


def json_problem(err: json.JSONDecodeError) -> str:
    """The decoder's whole message with its column, and what to do where a raw control character is the cause."""
    problem = f"{err.msg.removesuffix(' at')} at column {err.colno}"  # "Invalid control character at"
    if err.msg.startswith("Invalid control character"):
        problem += ": a raw tab or line break inside a string; write it as \\t or \\n"
    return problem


def require_text(obj: dict, key: str, path: Path, line: int, *, allow_empty: bool = False) -> str:
    """Return obj[key] as a string, or raise naming the field when missing, not a string, or empty."""
    if key not in obj or obj[key] is None:
        raise DataError(path, "missing", line, key)
    value = obj[key]
    if isinstance(value, (int, float)) and not isinstance(value, bool) and key.endswith("id"):
        value = str(value)  # numeric ids are common in BEIR exports
    if not isinstance(value, str):
        raise DataError(path, f"expected a string, got {type(value).__name__}", line, key)
    if not allow_empty and not value.strip():
        raise DataError(path, "empty", line, key)
    surrogate = LONE_SURROGATE.search(value)
    if surrogate:  # JSON's \ud800 escape decodes to a code point that UTF-8 cannot write: no index could store it
        raise DataError(path, f"holds a lone surrogate (\\u{ord(surrogate.group()):04x}), which is not text", line, key)
    return value


def require_id(obj: dict, key: str, path: Path, line: int) -> str:
    """Return obj[key] as an id: text without whitespace, since run and qrels files separate columns by it."""
    value = require_text(obj, key, path, line)
    if any(char.isspace() for char in value):
        raise DataError(path, f"id '{value}' holds whitespace, which TREC run and qrels files cannot carry", line, key)
    return value


class UniqueIds:
    """Remembers where each id was first seen so a duplicate can name both lines."""

    def __init__(self, path: Path, field_name: str):
        self.path, self.field_name = path, field_name
        self.first_line: dict[str, int] = {}

    def add(self, id_: str, line: int) -> None:
        if id_ in self.first_line:
            raise DataError(self.path, f"duplicate id '{id_}' (first seen on line {self.first_line[id_]})",
                            line, self.field_name)
        self.first_line[id_] = line


GZIP_MAGIC = b"\x1f\x8b"
MAX_UNPACKED_BYTES = 1 << 30  # a run or qrels file unpacks to far less; more is a damaged or hostile archive
CHUNK_BYTES = 1 << 20


def read_text(path: Path) -> str:
    """A whole text file as UTF-8, gunzipped first when it is gzip data; bad bytes name the file and the line."""
    path = Path(path)
    require_file(path)
    with open(path, "rb") as handle:
        packed = handle.read(len(GZIP_MAGIC)) == GZIP_MAGIC
    data = gunzipped(path) if packed else path.read_bytes()
    data = data.removeprefix(codecs.BOM_UTF8)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(path, f"bytes are not valid UTF-8 ({err.reason})", data[: err.start].count(b"\n") + 1) from None


def gunzipped(path: Path) -> bytes:
    """A gzip file's content, unpacked a chunk at a time and refused once it passes ``MAX_UNPACKED_BYTES`` (a gzip
    bomb would otherwise fill the memory before anything is read)."""
    chunks, size, cap = [], 0, MAX_UNPACKED_BYTES
    try:
        with gzip.open(path, "rb") as unpacking:
            while chunk := unpacking.read(CHUNK_BYTES):
                size += len(chunk)
                if size > cap:
                    raise DataError(path, f"unpacks to more than {cap >> 20} MiB, far more than a run or qrels file "
                                          f"holds (a damaged or hostile archive?); check it with 'gunzip -l'")
                chunks.append(chunk)
    except (OSError, EOFError, zlib.error) as err:
        raise DataError(path, f"not a complete gzip file ({err})") from None
    return b"".join(chunks)


def read_qrels_tsv(path: Path, doc_ids: set[str] | None, query_ids: set[str]) -> dict[str, dict[str, int]]:
    """Read a BEIR or TREC qrels file (gzipped or not); every named query must exist, and every named document
    too unless ``doc_ids`` is None (the corpus was not read: scoring a run needs only the judgements)."""
    qrels: dict[str, dict[str, int]] = {}
    lines = read_text(path).splitlines()
    for line_no, row in enumerate(csv.reader(lines,
                                             delimiter="\t" if "\t" in (lines[0] if lines else "") else " "), start=1):
        row = [cell for cell in row if cell != ""]
        if not row:
            continue
        if line_no == 1 and row[0] == "query-id":
            continue  # BEIR header
        if len(row) == 4:  # TREC: qid iteration docid rel
            row = [row[0], row[2], row[3]]
        if len(row) != 3:
            raise DataError(path,
                            f"expected 3 tab-separated columns (query-id, corpus-id, score), got {len(row)}", line_no)
        qid, did, rel = row
        if qid not in query_ids:
            raise DataError(path, f"unknown query id '{qid}'", line_no, "query-id")
        if doc_ids is not None and did not in doc_ids:
            raise DataError(path, f"unknown document id '{did}'", line_no, "corpus-id")
        try:
            qrels.setdefault(qid, {})[did] = int(rel)
        except ValueError:
            raise DataError(path, f"score '{rel}' is not an integer", line_no, "score") from None
    return qrels
