"""Files damaged where the cheap checks cannot see (same size, a line in the middle), files that are not what their
name says, and writes the machine cuts short: each ends in one line naming the file and what to do, and loses no
finished work. Index files are damaged in a copy of the tiny index, run folders are tiny bm25 runs."""

from __future__ import annotations

import errno
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from garen_infer.data import validate
from garen_infer.data.dataset import Dataset
from garen_infer.data.validate import read_jsonl, read_text
from garen_infer.errors import DataError, GarenError, storage_refusal
from garen_infer.index.file_guard import UNPARSABLE, reading
from garen_infer.index.folder import IndexFolder
from garen_infer.index.grouping.groups_format import Groups, write_groups
from garen_infer.running.runner import RunConfig
from garen_infer.running.session import execute
from garen_infer.storage.append_log import read_finished
from garen_infer.storage.trec import read_run

REPO = Path(__file__).resolve().parents[2]


def overwrite(path: Path, at: int, data: bytes) -> None:
    """Damage in place: the size (all the manifest's cheap check reads) stays as built."""
    with open(path, "r+b") as handle:
        handle.seek(at)
        handle.write(data)


@pytest.fixture
def index_copy(tiny_index, tmp_path) -> Path:
    path = tmp_path / "index"
    shutil.copytree(tiny_index.path, path)
    return path


# ---- index files ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("rel, reader, at, data", [
    ("embeddings.npy", "embeddings", 0, b"X" * 14),  # the magic and version
    ("embeddings.npy", "embeddings", 10, b"{'descr': '|O'"),  # the header says pickled objects
    ("bm25/params.json", "bm25", 0, b"X"),
    ("bm25/bm25s/vocab.index.json", "bm25", 0, b"X"),
    ("bm25/bm25s/data.csc.index.npy", "bm25", 0, b"X" * 14),
    ("knn_graph/pt_meta.json", "knn_graph", 0, b"X"),
    ("knn_graph/pt_meta.json", "knn_graph", 0, b'{"k": "x"}    '),  # JSON, but not the fields it must hold
])
def test_an_index_file_damaged_at_its_size_is_one_line_naming_it(index_copy, rel, reader, at, data):
    overwrite(index_copy / rel, at, data)
    folder = IndexFolder.open(index_copy)  # the sizes match: only reading finds it
    with pytest.raises(GarenError) as err:
        getattr(folder, reader)
    message = str(err.value)
    assert "\n" not in message and "damaged index file" in message and "garen-infer index" in message
    assert str(index_copy / rel.split("/")[0]) in message


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_vectors_overwritten_with_nan_or_infinity_are_refused_naming_the_row(index_copy, value):
    vectors = np.load(index_copy / "embeddings.npy")
    header = (index_copy / "embeddings.npy").stat().st_size - vectors.nbytes
    overwrite(index_copy / "embeddings.npy", header + 3 * vectors.strides[0] + 4, np.float32(value).tobytes())
    with pytest.raises(GarenError, match="embeddings.npy: damaged index file .row 3 holds NaN or infinity"):
        assert IndexFolder.open(index_copy).embeddings is None


def test_a_run_on_a_damaged_index_exits_with_one_line(index_copy, beir_dir, tmp_path, capsys):
    from conftest import one_error_line

    from garen_infer.doors.cli import main

    overwrite(index_copy / "bm25" / "params.json", 0, b"X")
    code = main(["run", "--dataset", f"beir:{beir_dir}", "--index", str(index_copy), "--method", "bm25",
                 "--out", str(tmp_path / "run")])
    assert code == 2 and "params.json" not in os.listdir(tmp_path / "run")
    assert "damaged index file" in one_error_line(capsys, "garen-infer run")


def groups_folder(tmp_path) -> tuple[Path, dict[str, int]]:
    ids = ["a", "b", "c"]
    records = [{"concept": f"c{g}", "summary": f"s{g}", "summarizer": "t"} for g in range(2)]
    write_groups(tmp_path / "groups", ids, [[0, 1], [2]], records)
    return tmp_path / "groups", {d: r for r, d in enumerate(ids)}


@pytest.mark.parametrize("line, where", [
    (b"X", "line 1"),  # the first byte replaced
    (b'{"group": 0, "docs": ["zz"], "concept": "c0", "summary": "s0", "summarizer": "t"}', "line 1"),
    (b'{"group": 0, "docs": ["a"], "concept": {"x": 1}, "summary": "s0", "summarizer": "t"}', "line 1"),
    (b'{"group": 0}', "line 1"),
    (b"\xff\xfe", "line 1"),
])
def test_a_damaged_groups_line_is_one_line_naming_it(tmp_path, line, where):
    folder, rows = groups_folder(tmp_path)
    lines = (folder / "groups.jsonl").read_bytes().splitlines(keepends=True)
    (folder / "groups.jsonl").write_bytes(line + lines[0][len(line):] if line == b"X" else line + b"\n" + lines[1])
    with pytest.raises(GarenError, match=f"groups.jsonl, {where}: damaged index file"):
        Groups.load(folder, rows)


def test_a_damaged_group_array_is_one_line_naming_it(tmp_path):
    folder, rows = groups_folder(tmp_path)
    assert Groups.load(folder, rows).members == [[0, 1], [2]]
    overwrite(folder / "doc_groups.npy", 0, b"X" * 10)
    with pytest.raises(GarenError, match="doc_groups.npy: damaged index file"):
        Groups.load(folder, rows)


# ---- run folders: a damaged trace line, a missing configuration, nothing to run -----------------------------------
def bm25_run(dataset, index, out: Path, lines: list, **changes) -> dict:
    return execute(dataset, index, RunConfig.build(method="bm25", **changes), out, log=lines.append)


def test_damaged_trace_lines_are_reported_and_skipped_and_the_queries_after_them_kept(tmp_path):
    log = tmp_path / "trace.jsonl"
    log.write_bytes(b'{garbage\n{"qid": "a"}\n\n{"no_qid": 1}\n["a list"]\n{"qid": "b"}\n\xff\n{"qid": "c", "x"')
    said = []
    assert list(read_finished(log, "qid", said.append)) == ["a", "b"]
    assert [line.split(": ", 1)[0] for line in said] == [f"{log}, line {n}" for n in (1, 4, 5, 7)]
    assert all("skipped" in line for line in said)
    assert log.read_bytes().endswith(b'{"qid": "b"}\n\xff\n')  # only the torn tail is cut


@pytest.mark.parametrize("line_no", [0, 1, 3])
def test_a_resume_past_a_damaged_trace_line_redoes_only_its_query(tiny_dataset, tiny_index, tmp_path, line_no):
    out, lines = tmp_path / "run", []
    first = bm25_run(tiny_dataset, tiny_index, out, lines)
    trace = (out / "trace.jsonl").read_text().splitlines()
    damaged_qid = json.loads(trace[line_no])["qid"]
    (out / "trace.jsonl").write_text("\n".join(trace[:line_no] + ["{garbage"] + trace[line_no + 1:]) + "\n")
    again = bm25_run(tiny_dataset, tiny_index, out, lines)
    assert any(f"line {line_no + 1}: not a JSON record" in line for line in lines)
    assert "[run] resuming: 3 of 4 queries already finished" in lines
    assert (out / "trace.jsonl").read_text().splitlines()[line_no].startswith(f'{{"qid": "{damaged_qid}"')
    assert {k: v for k, v in again.items() if "seconds" not in k} == {
        k: v for k, v in first.items() if "seconds" not in k
    }


@pytest.mark.parametrize("config_text", [None, "{trunc", "[]"])
def test_finished_queries_without_their_configuration_are_refused_not_relabelled(tiny_dataset, tiny_index, tmp_path,
                                                                                 config_text):
    out, lines = tmp_path / "run", []
    bm25_run(tiny_dataset, tiny_index, out, lines, limit=2)
    trace = (out / "trace.jsonl").read_bytes()
    if config_text is None:
        (out / "config.json").unlink()
    else:
        (out / "config.json").write_text(config_text)
    with pytest.raises(GarenError, match="config.json: (missing|unreadable|not a run configuration)") as err:
        bm25_run(tiny_dataset, tiny_index, out, lines, limit=3)
    assert "\n" not in str(err.value) and "another --out" in str(err.value)
    assert (out / "trace.jsonl").read_bytes() == trace  # nothing lost
    assert config_text is None or (out / "config.json").read_text() == config_text  # nor rewritten


def test_a_folder_without_configuration_or_finished_queries_starts_afresh(tiny_dataset, tiny_index, tmp_path):
    out, lines = tmp_path / "run", []
    out.mkdir()
    (out / "trace.jsonl").write_text("")
    assert bm25_run(tiny_dataset, tiny_index, out, lines)["queries"] == 4


@pytest.mark.parametrize("queries, qrels", [([], {}), ([], {"q1": {"vol1": 1}})])
def test_a_run_with_no_queries_is_refused_before_anything_is_written(tiny_dataset, tiny_index, tmp_path,
                                                                     queries, qrels):
    corpus_only = Dataset(tiny_dataset.name, tiny_dataset.documents, queries, qrels)
    with pytest.raises(GarenError, match="has no queries to run") as err:
        bm25_run(corpus_only, tiny_index, tmp_path / "run", [])
    assert "jsonl:<corpus>,<queries>" in str(err.value) and not (tmp_path / "run" / "run.trec").exists()


# ---- run and qrels files: scores, gzip by its bytes, sizes, what the path is ----------------------------------------
@pytest.mark.parametrize("score", ["nan", "NaN", "inf", "-inf", "Infinity", "1e999", "-1e999"])
def test_a_score_that_is_not_a_finite_number_is_refused_naming_the_line(tmp_path, score):
    run = tmp_path / "run.trec"
    run.write_text(f"q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 {score} t\n")
    with pytest.raises(DataError, match=f"line 2, field 'score': score '{score}' is not a finite number"):
        read_run(run)


RUN_LINES = "q1 Q0 vol1 1 2.5 t\nq1 Q0 vol2 2 1.5 t\n"


def test_a_cut_gzip_file_is_refused_naming_it(tmp_path):
    (tmp_path / "run.gz").write_bytes(gzip.compress(RUN_LINES.encode() * 100)[:-20])
    with pytest.raises(DataError, match="run.gz: not a complete gzip file"):
        read_run(tmp_path / "run.gz")


def test_a_gzip_bomb_is_refused_a_chunk_past_the_cap_with_memory_to_match(tmp_path, monkeypatch):
    monkeypatch.setattr(validate, "MAX_UNPACKED_BYTES", 2 << 20)
    bomb = tmp_path / "bomb.trec"  # 64 MiB of zeros in about 64 KiB: no suffix says what it is
    with gzip.open(bomb, "wb", compresslevel=9) as handle:
        for _ in range(64):
            handle.write(bytes(1 << 20))
    tracemalloc.start()
    try:
        with pytest.raises(DataError, match="bomb.trec: unpacks to more than 2 MiB"):
            read_run(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20  # the cap and a chunk or two, not the 64 MiB it unpacks to


@pytest.mark.parametrize("reader", [read_text, read_run, lambda p: list(read_jsonl(p))])
@pytest.mark.parametrize("kind, says", [("folder", "a folder, not a file"), ("device", "not a regular file"),
                                        ("missing", "file not found")])
def test_a_path_that_is_not_a_file_says_what_it_is(tmp_path, reader, kind, says):
    path = {"folder": tmp_path, "device": Path("/dev/zero"), "missing": tmp_path / "absent"}[kind]
    with pytest.raises(DataError, match=says):
        reader(path)


# ---- writes the machine cuts short --------------------------------------------------------------------------------
def short_write(filename=None) -> OSError:
    err = OSError("1000000 requested and 12784 written")  # numpy's tofile, with no errno
    err.filename = filename
    return err


@pytest.mark.parametrize("err, says", [
    (short_write("idx/bm25"), "idx/bm25: 1000000 requested and 12784 written; .* allow larger files"),
    (short_write(), "output: 1000000 requested"),
    (OSError(errno.EFBIG, "File too large", "big.npy"), "big.npy: File too large; .*allow larger files"),
    (OSError(errno.ENOSPC, "No space left on device", "x"), "x: No space left on device; .*free some space"),
    (OSError(errno.ENOTDIR, "Not a directory", "file/run"), "file/run: part of this path is a file, not a folder"),
])
def test_storage_failures_with_or_without_an_errno_are_one_line(err, says):
    refusal = storage_refusal(err)
    assert refusal is not None and "\n" not in str(refusal)
    assert __import__("re").search(says, str(refusal)), str(refusal)


def test_other_os_errors_stay_defects_to_show_in_full(tmp_path):
    assert storage_refusal(OSError("something else")) is None
    assert storage_refusal(OSError(errno.ECONNRESET, "reset")) is None
    assert storage_refusal(OSError(errno.EEXIST, "File exists", str(tmp_path))) is None  # a folder that exists


def test_a_cache_or_run_folder_under_a_file_says_so(tmp_path, beir_dir, tiny_index, capsys):
    from conftest import one_error_line

    from garen_infer.doors.cli import main
    from garen_infer.llm.cache import ResponseCache

    (tmp_path / "f").write_text("")
    for path in (tmp_path / "f" / "cache.sqlite", tmp_path / "f" / "a" / "cache.sqlite"):
        with pytest.raises(GarenError, match="part of this path is a file, not a folder") as err:
            ResponseCache(path)
        assert "free some space" not in str(err.value)
    code = main(["run", "--dataset", f"beir:{beir_dir}", "--index", str(tiny_index.path), "--method", "bm25",
                 "--out", str(tmp_path / "f" / "run")])
    assert code == 2 and "is a file, not a folder" in one_error_line(capsys, "garen-infer run")


BM25_ONLY = "index:\n  bm25: {variant: bm25s}\n"


def test_a_file_size_limit_during_an_index_build_is_one_line(beir_dir, tmp_path):
    """ulimit -f: numpy's writes come back short with no errno; the command still says what happened."""
    (tmp_path / "bm25.yaml").write_text(BM25_ONLY)
    limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (600, 600))  # noqa: E731
    done = subprocess.run([sys.executable, "-m", "garen_infer", "index", "--dataset", f"beir:{beir_dir}", "--preset",
                           str(tmp_path / "bm25.yaml"), "--out", str(tmp_path / "index")], capture_output=True,
                          text=True, preexec_fn=limit, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                          timeout=120)
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert done.returncode == 2 and "Traceback" not in done.stderr and len(errors) == 1, done.stderr
    assert "allow larger files" in errors[0]


@pytest.mark.parametrize("failure", UNPARSABLE)
def test_every_parse_failure_of_an_index_file_is_one_line_naming_it(failure, tmp_path):
    """numpy, json, scipy and bm25s each fail in their own way on bytes of another format: each is the same line."""
    with pytest.raises(GarenError, match="damaged index file") as caught:
        with reading(tmp_path / "bm25"):
            raise failure("bytes of another format")
    assert str(tmp_path / "bm25") in str(caught.value)
