"""Sharded runs: ``run --shard i/n`` in separate processes, ``merge`` back into the files an unsharded run writes,
and every merge that would mix, repeat or miss a shard refused with one line."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest
from conftest import QRELS, QUERIES, REPO, one_error_line, write_beir

from garen_infer.configuration.shards import assign, parse_shard
from garen_infer.doors.cli import main

# measured times: the shards' own clocks, not part of what a merge reproduces
TIMES_IN_METRICS = {"mean_model_seconds", "mean_seconds_in_flight", "wall_seconds_per_query"}
RERANK = ["--method", "rerank", "--budget", "8", "--set", "methods.rerank.window=4", "--set", "methods.rerank.stride=2"]


def run_args(beir_dir, index, out, *extra):
    return ["run", "--dataset", f"beir:{beir_dir}", "--index", str(index.path), *RERANK, "--out", str(out), *extra]


def untimed_trace(folder) -> list[dict]:
    records = [json.loads(line) for line in (folder / "trace.jsonl").read_text(encoding="utf-8").splitlines()]
    for record in records:
        record.pop("seconds")
        record["ledger"].pop("model_seconds")
        for role in record["ledger"]["roles"].values():
            role.pop("seconds")
    return records


def untimed_metrics(folder) -> dict:
    return {k: v for k, v in json.loads((folder / "metrics.json").read_text()).items() if k not in TIMES_IN_METRICS}


@pytest.fixture(scope="module")
def sharded(beir_dir, tiny_index, tmp_path_factory):
    """The same run unsharded (in this process, no cache) and as three shards run by three processes at once,
    all writing one fresh response cache."""
    root = tmp_path_factory.mktemp("shards")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-m", "garen_infer",
                               *run_args(beir_dir, tiny_index, root / f"shard-{i}", "--shard", f"{i}/3",
                                          "--cache", str(root / "cache.sqlite"))],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for i in (1, 2, 3)]
    assert main(run_args(beir_dir, tiny_index, root / "whole", "--no-cache")) == 0
    for proc in procs:
        assert proc.wait(timeout=600) == 0, proc.stderr.read()
    return root


def test_three_shards_merged_equal_the_unsharded_run(sharded, beir_dir, capsys):
    shards = [sharded / f"shard-{i}" for i in (1, 2, 3)]
    assert sorted(len(untimed_trace(s)) for s in shards) == [1, 1, 2]  # 4 queries dealt out
    assert json.loads((shards[1] / "config.json").read_text())["shard"] == {"index": 2, "count": 3}
    assert main(["merge", *map(str, reversed(shards)), "--out", str(sharded / "merged"), "--dataset",
                 f"beir:{beir_dir}"]) == 0
    merged, whole = sharded / "merged", sharded / "whole"
    assert (merged / "run.trec").read_bytes() == (whole / "run.trec").read_bytes()
    assert (merged / "config.json").read_bytes() == (whole / "config.json").read_bytes()
    assert untimed_trace(merged) == untimed_trace(whole)
    assert untimed_metrics(merged) == untimed_metrics(whole)
    assert "wall_seconds_per_query" in json.loads((merged / "metrics.json").read_text())
    assert json.loads((merged / "merge.json").read_text())["partial"] is False


def test_an_incomplete_or_repeated_merge_is_refused_and_partial_is_labelled(sharded, beir_dir, capsys, tmp_path):
    one, two, three = (str(sharded / f"shard-{i}") for i in (1, 2, 3))
    base = ["--out", str(tmp_path / "m"), "--dataset", f"beir:{beir_dir}"]
    assert main(["merge", one, three, *base]) == 2
    assert "shard 2/3 is missing" in one_error_line(capsys, alone=False)
    assert main(["merge", one, one, two, three, *base]) == 2
    assert "are both shard 1/3" in one_error_line(capsys, alone=False)
    assert main(["merge", one, str(sharded / "whole"), *base]) == 2
    assert "not a shard" in one_error_line(capsys, alone=False)
    assert not (tmp_path / "m").exists()  # nothing half-written

    assert main(["merge", one, three, *base, "--partial"]) == 0
    metrics = json.loads((tmp_path / "m" / "metrics.json").read_text())
    assert metrics["partial"].startswith("3 of 4 queries; shard(s) 2/3 missing")
    assert len(untimed_trace(tmp_path / "m")) == 3


def test_a_merge_of_two_configurations_is_refused(sharded, beir_dir, tiny_index, tmp_path, capsys):
    other = tmp_path / "other-2"
    assert main(run_args(beir_dir, tiny_index, other, "--no-cache", "--shard", "2/3", "--set",
                         "methods.rerank.stride=1")) == 0
    capsys.readouterr()
    assert main(["merge", str(sharded / "shard-1"), str(other), str(sharded / "shard-3"), "--out", str(tmp_path / "m"),
                 "--dataset", f"beir:{beir_dir}"]) == 2
    assert "different configurations (method_options differ)" in one_error_line(capsys, alone=False)


def test_a_shard_of_another_split_or_queries_file_is_refused(sharded, beir_dir, tiny_index, tmp_path, capsys):
    four = tmp_path / "of-four"
    assert main(run_args(beir_dir, tiny_index, four, "--no-cache", "--shard", "1/4")) == 0
    capsys.readouterr()
    assert main(["merge", str(sharded / "shard-1"), str(four), "--out", str(tmp_path / "m"), "--dataset",
                 f"beir:{beir_dir}"]) == 2
    assert "the shards of one split have the same N" in one_error_line(capsys, alone=False)

    fewer = write_beir(tmp_path / "edited" / beir_dir.name, queries=QUERIES[:3],
                       qrels=[r for r in QRELS if r[0] != "q4"])  # q4 gone
    assert main(["merge", *(str(sharded / f"shard-{i}") for i in (1, 2, 3)), "--out", str(tmp_path / "m"),
                 "--dataset", f"beir:{fewer}"]) == 2
    assert "which is not in shard 1/3 of tiny/test" in one_error_line(capsys, alone=False)


@pytest.mark.parametrize("kill_at", ["write:merge.json", "renamed:config.json", "write:run.trec",
                                     "renamed:metrics.json"])
def test_a_merge_killed_anywhere_is_finished_by_the_same_command(sharded, beir_dir, tmp_path, kill_at, capsys):
    """kill -9 at a point of the merge's writes (its first record, the outputs, the last rename but one): the same
    command then finishes the folder as a merge never killed writes it."""
    out = tmp_path / "m"
    argv = ["merge", *(str(sharded / f"shard-{i}") for i in (1, 2, 3)), "--out", str(out), "--dataset",
            f"beir:{beir_dir}"]
    env = {**os.environ, "GAREN_KILL_AT": kill_at,
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    killed = subprocess.run([sys.executable, "-m", "garen_infer", *argv], env=env, capture_output=True,
                            text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr
    assert main(argv) == 0, capsys.readouterr().err
    assert (out / "run.trec").read_bytes() == (sharded / "whole" / "run.trec").read_bytes()
    assert untimed_trace(out) == untimed_trace(sharded / "whole")
    assert json.loads((out / "merge.json").read_text())["partial"] is False
    assert not [p.name for p in out.iterdir() if ".tmp-" in p.name]


def test_shards_run_on_an_edited_corpus_of_the_same_name_are_refused(sharded, beir_dir, tmp_path, capsys):
    from conftest import DOCS

    docs = [(d, t, x + (" (revised)" if d == DOCS[0][0] else "")) for d, t, x in DOCS]
    edited = write_beir(tmp_path / "edited" / beir_dir.name, docs=docs)
    assert main(["merge", *(str(sharded / f"shard-{i}") for i in (1, 2, 3)), "--out", str(tmp_path / "m"),
                 "--dataset", f"beir:{edited}"]) == 2
    assert "a corpus other than --dataset's tiny/test" in one_error_line(capsys, alone=False)
    assert not (tmp_path / "m").exists()


def test_the_split_is_the_documented_sha256_deal():
    """Ids ordered by SHA-256 of the id, dealt 1, 2, 3, 1, ...: a split any other tool can compute (SHA-1 would
    move 9 of these 12)."""
    assert assign([f"q{k}" for k in range(12)], 3) == {1: ["q7", "q0", "q6", "q10"], 2: ["q4", "q9", "q2", "q8"],
                                                        3: ["q5", "q3", "q1", "q11"]}


def test_the_split_depends_on_query_ids_not_their_order():
    ids = [f"q{k}" for k in range(100)]
    split = assign(ids, 7)
    assert split == assign(list(reversed(ids)), 7)
    assert sorted(q for part in split.values() for q in part) == sorted(ids)
    assert {len(part) for part in split.values()} <= {14, 15}
    shuffled = ids[:]
    random.Random(0).shuffle(shuffled)
    assert assign(shuffled, 7) == split
    assert parse_shard("3/7") == parse_shard(" 3/7 ".strip())


@pytest.mark.parametrize("text", ["0/3", "4/3", "1", "a/b", "1/0", "2/1"])
def test_a_malformed_shard_is_one_line(text, beir_dir, tiny_index, tmp_path, capsys):
    assert main(run_args(beir_dir, tiny_index, tmp_path / "r", "--shard", text)) == 2
    assert "expected I/N with 1 <= I <= N" in one_error_line(capsys, alone=False)
    assert not (tmp_path / "r").exists()


def test_more_shards_than_queries_is_refused(beir_dir, tiny_index, tmp_path, capsys):
    assert main(run_args(beir_dir, tiny_index, tmp_path / "r", "--no-cache", "--shard", "5/5")) == 2
    assert "4 judged queries cannot fill 5 shards" in one_error_line(capsys, alone=False)
    assert not (tmp_path / "r").exists()
