"""A damaged index is refused in one line, never read: the manifest records each stage file's size and SHA-256
and a seal over each stage's entry. Opening checks presence, sizes and seals; ``garen-infer index --verify``
reads every byte; swapped ids in doc_ids.json are caught against the corpus; the next build rebuilds what is
damaged. Each case damages a copy of a real index the way a user or a disk would."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from garen_infer.doors.cli import main
from garen_infer.errors import GarenError
from garen_infer.index.folder import IndexFolder
from garen_infer.index.stage_files import file_sha256

REBUILD = "run 'garen-infer index' on it again with the preset that built it: it rebuilds what is damaged"


@pytest.fixture
def index(full_index, tmp_path):
    """A copy of the tiny index with every cpu-default stage, for one test to damage."""
    path = tmp_path / "index"
    shutil.copytree(full_index.path, path)
    return path


def manifest(path):
    return json.loads((path / "manifest.json").read_text())


def refusal(path, dataset=None) -> str:
    with pytest.raises(GarenError) as refused:
        IndexFolder.open(path, dataset)
    return str(refused.value)


def test_every_stage_file_is_recorded_with_its_size_and_digest(index):
    recorded = manifest(index)
    assert recorded["doc_ids"] == {"size": (index / "doc_ids.json").stat().st_size,
                                   "sha256": file_sha256(index / "doc_ids.json")}
    listed = {"doc_ids.json", "manifest.json", ".garen-writer.lock"}
    for name, entry in recorded["stages"].items():
        assert entry["files"] and len(entry["seal"]) == 64, name
        for rel, file in entry["files"].items():
            assert file == {"size": (index / rel).stat().st_size, "sha256": file_sha256(index / rel)}
            listed.add(rel)
    on_disk = {p.relative_to(index).as_posix() for p in index.rglob("*") if p.is_file()}
    assert on_disk == listed  # nothing a stage wrote goes unrecorded


DAMAGED = ["embeddings.npy", "groups/doc_groups.npy", "groups/groups.jsonl", "knn_graph/edges.u32.np",
           "bm25/bm25s/data.csc.index.npy", "proximity_graph/neighbours.npy", "semantic_tree/nodes.jsonl"]


@pytest.mark.parametrize("rel", DAMAGED)
def test_a_truncated_or_missing_stage_file_is_refused_on_open(rel, index, tiny_dataset):
    stage = next(name for name, entry in manifest(index)["stages"].items() if rel in entry["files"])
    size = (index / rel).stat().st_size
    with open(index / rel, "r+b") as handle:
        handle.truncate(size // 2)
    assert refusal(index, tiny_dataset) == (f"{index}: damaged index: {rel} has {size // 2} bytes, not the "
                                            f"{size} it was written with (stage '{stage}'); {REBUILD}")
    (index / rel).unlink()
    assert refusal(index) == f"{index}: damaged index: {rel} is missing (stage '{stage}'); {REBUILD}"


def test_a_damaged_file_is_one_line_from_the_command(index, beir_dir, tmp_path, capsys):
    with open(index / "knn_graph" / "edges.u32.np", "r+b") as handle:
        handle.truncate(10)
    assert main(["run", "--dataset", str(beir_dir), "--index", str(index), "--method", "garen", "--out",
                 str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"garen-infer run: error: {index}: damaged index: knn_graph/edges.u32.np has 10 "
                          "bytes") and err.count("\n") == 1
    (index / "doc_ids.json").unlink()
    assert main(["run", "--dataset", str(beir_dir), "--index", str(index), "--method", "bm25", "--out",
                 str(tmp_path / "run")]) == 2
    assert (
        capsys.readouterr().err
        == f"garen-infer run: error: {index}: damaged index: doc_ids.json is missing; {REBUILD}\n"
    )


def test_a_hand_edited_stage_param_is_refused(index):
    edited = manifest(index)
    edited["stages"]["knn_graph"]["params"]["k"] = 8  # the graph on disk has 16 neighbours per document
    (index / "manifest.json").write_text(json.dumps(edited))
    assert refusal(index) == (f"{index}: damaged index: the manifest entry of stage 'knn_graph' was edited "
                              f"after the stage was built (its params or files no longer match its seal); {REBUILD}")


def test_swapped_ids_in_doc_ids_json_are_refused(index, tiny_dataset, beir_dir, capsys):
    ids = json.loads((index / "doc_ids.json").read_text())
    ids[0], ids[1] = ids[1], ids[0]  # same bytes, same size: every row now names the other document
    (index / "doc_ids.json").write_text(json.dumps(ids))
    assert (
        refusal(index, tiny_dataset)
        == f"{index / 'doc_ids.json'}: the document ids are not the corpus's, in its order; {REBUILD}"
    )
    assert main(["index", "--out", str(index), "--verify"]) == 2  # without the corpus, the digest still tells
    assert capsys.readouterr().err == (f"garen-infer index: error: {index}: damaged index: doc_ids.json has "
                                       f"other contents than it was written with (sha256 differs); {REBUILD}\n")


def test_verify_reads_every_byte(index, capsys):
    assert main(["index", "--out", str(index), "--verify"]) == 0
    out = capsys.readouterr().out
    files = 1 + sum(len(entry["files"]) for entry in manifest(index)["stages"].values())
    assert f"{index}: {files} file(s) match the digests of manifest.json" in out
    vectors = np.load(index / "embeddings.npy")
    vectors[[0, 1]] = vectors[[1, 0]]  # same size, other contents: only the digest can tell
    np.save(index / "embeddings.npy", vectors)
    IndexFolder.open(index)  # the cheap checks pass
    assert main(["index", "--out", str(index), "--verify"]) == 2
    assert capsys.readouterr().err == (
        f"garen-infer index: error: {index}: damaged index: embeddings.npy "
        "has other contents than it was written with (sha256 differs) (stage 'embeddings'); "
        f"rebuild it with 'garen-infer index --force' and the preset that built it\n"
    )


def test_the_next_build_rebuilds_what_is_damaged(index, full_index, tiny_dataset):
    from conftest import cpu_default_stages

    from garen_infer.index.stages import IndexConfig

    with open(index / "knn_graph" / "weights.f16.np", "r+b") as handle:
        handle.truncate(4)
    (index / "doc_ids.json").write_text("[]")
    logged = []
    IndexFolder.build(tiny_dataset, index, IndexConfig.from_dict(cpu_default_stages()), log=logged.append)
    # and what was built from it
    assert "[index] knn_graph: building" in logged and "[index] groups: building" in logged
    assert "[index] bm25: already built with these params, kept" in logged
    rebuilt = IndexFolder.open(index, tiny_dataset)
    assert rebuilt.doc_ids == tiny_dataset.doc_ids
    assert (index / "knn_graph" / "weights.f16.np").read_bytes() == (
        full_index.path / "knn_graph" / "weights.f16.np"
    ).read_bytes()
