"""``garen-train mine`` end to end on the tiny corpus of conftest.py, with a training split of its own: the real
GAREN traversal (cpu-default models) on the real index, the files and manifest, resume, evaluation mining, and
every refusal of the evaluation-split guard as exit code 2 with one line and no output left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import QUERIES, REPO, one_error_line, write_beir

from garen_train.cli import main
from garen_train.mining.folder import check_training_data, read_mined

TRAIN_QUERIES = [
    ("t1", "what makes magma reach the surface", []),
    ("t2", "where does photosynthesis happen in a leaf", []),
    ("t3", "Catching an  exception in Python", []),  # q4 of the test split, up to case and spacing
    ("t4", "how do python generators yield values", []),
]
TRAIN_QRELS = [("t1", "vol4", 1), ("t1", "vol1", 1), ("t2", "pho2", 2), ("t3", "py3", 1), ("t4", "py4", 1),
               ("t4", "py1", 0)]
# windows of 4 keeping 2, budget 8, K_g 2: several navigator rounds per query on 12 documents
SMALL = ["--budget", "8", "--set", "methods.garen.window=4", "--set", "methods.garen.keep=2", "--set",
         "methods.garen.k_groups=2"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The tiny corpus (the same documents, so full_index serves it) with train and test splits."""
    folder = tmp_path_factory.mktemp("mine") / "tiny"
    write_beir(folder, queries=QUERIES + TRAIN_QUERIES)
    return write_beir(folder, queries=QUERIES + TRAIN_QUERIES, qrels=TRAIN_QRELS, split="train")


def mine(data, index, out, *extra, split="train"):
    return main(["mine", "--dataset", f"beir:{data}:{split}", "--index", str(index.path), "--out", str(out),
                 "--no-cache", *SMALL, *extra])


@pytest.fixture(scope="module")
def mined(data, full_index, tmp_path_factory):
    out = tmp_path_factory.mktemp("mined") / "train"
    assert mine(data, full_index, out, "--drop-eval-overlap", "--negatives", "3") == 0
    return out


def test_mined_pairs_follow_the_contract(mined, full_index, tiny_dataset):
    pairs = read_mined(mined, purpose="training")
    groups, documents, manifest = pairs.groups, pairs.documents, pairs.manifest
    assert {g["qid"] for g in groups} == {"t1", "t2", "t4"}  # t3 is a test query by text: left out
    assert manifest["guard"]["dropped"] == [{"qid": "t3", "evaluation": "tiny/test", "evaluation_qid": "q4",
                                             "by": "text"}]
    assert manifest["guard"]["evaluation_splits"][0]["name"] == "tiny/test"  # found beside the train split

    index_groups = full_index.groups()
    qrels = {"t1": {"vol4", "vol1"}, "t2": {"pho2"}, "t4": {"py4"}}
    doc_index = tiny_dataset.doc_index
    for g in groups:
        members = {tiny_dataset.documents[r].id for r in index_groups.members[int(g["item"])]}
        assert g["text"] == index_groups.texts[int(g["item"])]  # exactly what the navigator reads
        assert g["label"] == int(bool(members & qrels[g["qid"]]))
        assert g["provenance"] in ("scored", "unreached_gold") and 0.0 <= g["score"] <= 1.0
        assert (g["iteration"] is None) == (g["provenance"] == "unreached_gold")
    trace = {r["qid"]: r for r in map(json.loads, (mined / "traversal" / "trace.jsonl").read_text().splitlines())}
    for qid, record in trace.items():  # every group the navigator scored is a line, in the order it was scored
        scored = [str(g) for step in record["trace"]["iterations"] for g in step["scored"]]
        assert [g["item"] for g in groups if g["qid"] == qid and g["provenance"] == "scored"] == scored
        gold_groups = {str(index_groups.doc_group[doc_index[d]]) for d in qrels[qid]}
        assert {g["item"] for g in groups if g["qid"] == qid and g["label"]} == gold_groups  # every gold group, once

    assert sum(g["provenance"] == "scored" for g in groups) > 3  # the windows did make the navigator work
    for d in documents:
        doc = tiny_dataset.documents[doc_index[d["item"]]]
        assert d["text"] == doc.full_text and d["label"] == int(d["item"] in qrels[d["qid"]])
    # py1: rel 0
    assert {d["item"] for d in documents if d["qid"] == "t4" and d["provenance"] == "judged"} == {"py4", "py1"}
    assert all(sum(d["provenance"] == "hard_negative" and d["qid"] == q for d in documents) <= 3 for q in qrels)

    counts = manifest["counts"]
    assert counts["groups"]["lines"] == len(groups) and counts["documents"]["lines"] == len(documents)
    assert counts["groups"]["positives"] == sum(g["label"] for g in groups)
    assert counts["groups"]["unreached_gold"] == sum(g["provenance"] == "unreached_gold" for g in groups)
    assert manifest["index"]["corpus"]["fingerprint"] == tiny_dataset.fingerprint()
    assert manifest["traversal"]["config"]["method_options"]["window"] == 4 and manifest["purpose"] == "training"
    assert manifest["mining"]["negatives"]["count"] == 3 and manifest["preset"]["name"] == "cpu-default"
    assert set(manifest["seconds"]) == {"traversal", "first_stage", "scoring", "total"}
    assert (mined / "traversal" / "run.trec").is_file() and "nDCG@10" in manifest["traversal"]["metrics"]


def test_mining_again_resumes_and_writes_the_same_pairs(mined, data, full_index, tmp_path, capsys):
    import shutil

    copy = tmp_path / "again"
    shutil.copytree(mined, copy)
    assert mine(data, full_index, copy, "--drop-eval-overlap", "--negatives", "3") == 0
    assert "resuming: 3 of 3 queries already finished" in capsys.readouterr().err
    for name in ("groups.jsonl", "documents.jsonl"):
        assert (copy / name).read_bytes() == (mined / name).read_bytes()


def test_a_mine_killed_mid_traversal_resumes_to_the_same_bytes(mined, data, full_index, tmp_path):
    """A mine killed after its first query, run again, writes what an unbroken mine writes, byte for byte: a query's
    numbers do not depend on which other queries were batched with it (the resumed ones run without the first)."""
    import shutil

    copy = tmp_path / "killed"
    shutil.copytree(mined, copy)
    trace = copy / "traversal" / "trace.jsonl"
    trace.write_text(trace.read_text().splitlines(keepends=True)[0])  # what kill -9 after one query leaves
    for name in ("groups.jsonl", "documents.jsonl", "manifest.json", "traversal/run.trec", "traversal/metrics.json"):
        (copy / name).unlink(missing_ok=True)
    assert mine(data, full_index, copy, "--drop-eval-overlap", "--negatives", "3") == 0
    for name in ("groups.jsonl", "documents.jsonl", "traversal/run.trec", "traversal/trace.jsonl"):
        if name.endswith("trace.jsonl"):  # what each query found and scored; its timings are the rerun's own
            def strip(text: str) -> list[dict]:
                return [{k: json.loads(line)[k] for k in ("qid", "ranking", "trace")} for line in text.splitlines()]

            assert strip((copy / name).read_text()) == strip((mined / name).read_text())
        else:
            assert (copy / name).read_bytes() == (mined / name).read_bytes(), name


def test_the_test_split_mined_for_evaluation_never_trains(mined, data, full_index, tmp_path, capsys):
    out = tmp_path / "test"
    assert mine(data, full_index, out, "--evaluation", split="test") == 0
    evaluation = read_mined(out)
    assert evaluation.purpose == "evaluation" and {g["qid"] for g in evaluation.groups} == {"q1", "q2", "q3", "q4"}
    check_training_data(read_mined(mined), evaluation)  # the guarded training file shares no query with it
    assert main(["mine", "--dataset", f"beir:{data}:test", "--index", str(full_index.path), "--out",
                 str(tmp_path / "x"),
                 "--evaluation", "--eval-dataset", f"beir:{data}:test"]) == 2
    assert "--evaluation marks evaluation data" in one_error_line(capsys, "garen-train mine", alone=False)


@pytest.mark.parametrize("split, expected", [
    # t3 repeats test query q4: the test split beside the train split is guarded without being named
    ("train",
     "queries of tiny/train are evaluation queries: 1 in evaluation split tiny/test (t3 (text of q4)); pass "
     "--drop-eval-overlap"),
    ("test", "tiny/test is an evaluation split: mine it with --evaluation"),
])
def test_the_guard_refuses_with_one_line_and_leaves_nothing(split, expected, data, full_index, tmp_path, capsys):
    out = tmp_path / "out"
    assert mine(data, full_index, out, split=split) == 2
    assert expected in one_error_line(capsys, "garen-train mine", alone=False)
    assert not out.exists()


def test_an_id_overlap_is_refused_without_drop(data, full_index, tmp_path, capsys):
    other = write_beir(tmp_path / "other", queries=[("t1", "an unrelated question", [])], qrels=[("t1", "vol1", 1)])
    out = tmp_path / "out"
    code = mine(data, full_index, out, "--eval-dataset", f"beir:{other}:test")
    message = one_error_line(capsys, "garen-train mine", alone=False)
    assert code == 2 and "1 in evaluation split other/test (t1)" in message and "tiny/test (t3 (text of q4))" in message
    assert not out.exists()


def test_mine_refuses_an_index_folder_as_its_out(data, full_index, tmp_path, capsys):
    import shutil

    index = tmp_path / "index"
    shutil.copytree(full_index.path, index)
    manifest = (index / "manifest.json").read_bytes()
    assert main(["mine", "--dataset", f"beir:{data}:train", "--index", str(index), "--out", str(index),
                 "--no-cache", *SMALL,
                 "--drop-eval-overlap"]) == 2
    refusal = one_error_line(capsys, "garen-train mine", alone=False)
    assert f"{index}: is an index folder (written by 'garen-infer index'); writing a mined folder there" in refusal
    assert (index / "manifest.json").read_bytes() == manifest and not (index / "traversal").exists()


def test_a_second_mine_on_one_out_is_refused_while_the_first_writes_it(data, full_index, tmp_path, capsys):
    """The whole mined folder is locked, not only traversal/: a mine with other pairing options (same traversal)
    cannot write its files and manifest over a mine still writing them."""
    import threading

    from garen_infer.storage.writer_lock import writer_lock

    out, holding, release = tmp_path / "out", threading.Event(), threading.Event()

    def first_mine():  # holds the lock as a mine in flight does (another thread counts as another writer)
        with writer_lock(out, "mined folder"):
            holding.set()
            release.wait(30)

    holder = threading.Thread(target=first_mine)
    holder.start()
    try:
        holding.wait(30)
        assert mine(data, full_index, out, "--drop-eval-overlap", "--negatives", "1") == 2
        assert f"{out}: another process is writing this mined folder" in one_error_line(
            capsys, "garen-train mine", alone=False
        )
        assert sorted(p.name for p in out.iterdir()) == [".garen-writer.lock"]
    finally:
        release.set()
        holder.join()


def test_a_jsonl_test_split_is_refused_for_training(data, full_index, tmp_path, capsys):
    spec = f"jsonl:{data}/corpus.jsonl,{data}/queries.jsonl,{data}/qrels/test.tsv"
    out = tmp_path / "out"
    assert main(["mine", "--dataset", spec, "--index", str(full_index.path), "--out", str(out), "--no-cache",
                 *SMALL]) == 2
    assert "corpus is an evaluation split: mine it with --evaluation" in one_error_line(
        capsys, "garen-train mine", alone=False
    )
    assert not out.exists()


def test_a_jsonl_train_split_is_guarded_against_the_test_qrels_beside_it(data, full_index, tmp_path, capsys):
    spec = f"jsonl:{data}/corpus.jsonl,{data}/queries.jsonl,{data}/qrels/train.tsv"
    assert main(["mine", "--dataset", spec, "--index", str(full_index.path), "--out", str(tmp_path / "out"),
                 "--no-cache", *SMALL]) == 2
    said = one_error_line(capsys, "garen-train mine", alone=False)
    assert "queries of tiny/corpus are evaluation queries: 1 in evaluation split tiny/corpus (t3 (text of q4))" in said


@pytest.fixture(scope="module")
def mined_shards(data, full_index, tmp_path_factory):
    """The mine of ``mined`` as three shards."""
    root = tmp_path_factory.mktemp("mined-shards")
    for i in (1, 2, 3):
        assert mine(data, full_index, root / f"shard-{i}", "--drop-eval-overlap", "--negatives", "3",
                    "--shard", f"{i}/3") == 0
    return root


def without_times(manifest: dict) -> dict:
    timed = ("mean_model_seconds", "mean_seconds_in_flight", "wall_seconds_per_query")
    metrics = {k: v for k, v in manifest["traversal"]["metrics"].items() if k not in timed}
    # the digest covers the times
    untimed = {k: v for k, v in manifest.items() if k not in ("seconds", "manifest_sha256")}
    return {**untimed, "traversal": {**manifest["traversal"], "metrics": metrics}}


def test_mined_shards_merged_equal_the_unsharded_mine(mined, mined_shards, data, tmp_path):
    shards = [read_mined(mined_shards / f"shard-{i}") for i in (1, 2, 3)]
    assert [len({g["qid"] for g in s.groups}) for s in shards] == [1, 1, 1] and shards[0].manifest[
        "shard"
    ] == {"index": 1, "count": 3}
    out = tmp_path / "merged"
    assert main(["merge", *(str(mined_shards / f"shard-{i}") for i in (3, 1, 2)), "--dataset",
                 f"beir:{data}:train", "--out", str(out)]) == 0
    for name in ("groups.jsonl", "documents.jsonl", "traversal/run.trec", "traversal/config.json"):
        assert (out / name).read_bytes() == (mined / name).read_bytes(), name
    merged = read_mined(out, purpose="training")
    assert without_times(merged.manifest) == without_times(read_mined(mined).manifest)


@pytest.mark.parametrize("kill_at", ["renamed:config.json", "write:groups.jsonl", "write:manifest.json"])
def test_a_mined_merge_killed_anywhere_is_finished_by_the_same_command(mined, mined_shards, data, tmp_path, kill_at):
    """kill -9 in the traversal's merge, between the pair files, before the manifest: the same command finishes."""
    out = tmp_path / "merged"
    argv = ["merge", *(str(mined_shards / f"shard-{i}") for i in (1, 2, 3)), "--dataset",
            f"beir:{data}:train", "--out", str(out)]
    env = {**os.environ, "GAREN_KILL_AT": kill_at,
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    killed = subprocess.run([sys.executable, "-m", "garen_train", *argv], env=env, capture_output=True,
                            text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr
    assert main(argv) == 0
    for name in ("groups.jsonl", "documents.jsonl", "traversal/run.trec"):
        assert (out / name).read_bytes() == (mined / name).read_bytes(), name
    assert without_times(read_mined(out, purpose="training").manifest) == without_times(read_mined(mined).manifest)


def test_an_incomplete_or_mixed_mined_merge_is_refused(mined_shards, data, full_index, tmp_path, capsys):
    one, two, three = (str(mined_shards / f"shard-{i}") for i in (1, 2, 3))
    base = ["--dataset", f"beir:{data}:train", "--out", str(tmp_path / "m")]
    assert main(["merge", one, two, *base]) == 2
    assert "shard 3/3 is missing" in capsys.readouterr().err
    other = tmp_path / "other-3"
    assert mine(data, full_index, other, "--drop-eval-overlap", "--negatives", "2", "--shard", "3/3") == 0
    capsys.readouterr()
    assert main(["merge", one, two, str(other), *base]) == 2
    assert "different configurations (mining differ)" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()

    assert main(["merge", one, three, *base, "--partial"]) == 0
    partial = read_mined(tmp_path / "m")
    assert partial.manifest["partial"].startswith("2 of 3 queries; shard(s) 2/3 missing")
    assert partial.manifest["dataset"]["mined_queries"] == 2 and "partial" in partial.manifest["traversal"]["metrics"]
