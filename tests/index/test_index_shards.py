"""Model-driven index stages built in shards (``garen-infer index --shard I/N``, then ``--merge-shards``)
against a served model (an OpenAI-compatible stand-in on loopback, through the real ``openai`` backend): the
merged stage equals an unsharded build byte for byte, every prompt is asked once, a finished shard asks
nothing when run again, and what cannot make the whole stage is refused in one line."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest
import yaml
from conftest import cpu_default_stages, one_error_line
from openai_server import chat_answer

from garen_infer.doors.cli import main


def _summary(body: dict) -> dict:
    """A summary that depends on the prompt alone, so any process asking it gets the same answer."""
    tag = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).hexdigest()[:8]
    return chat_answer(json.dumps({"concept": f"topic {tag}", "summary": f"Documents about {tag}."}))


@pytest.fixture
def served(server):
    server.answer((200, _summary))
    return server


def _spec(server, model: str = "summarizer") -> dict:
    return {"backend": "openai", "model": model, "base_url": server.base_url, "api_key_env": None,
            "concurrency": 4, "sampling": {"max_tokens": 512}}


def _preset(path, server, extra: dict | None = None):
    stages = cpu_default_stages()  # as the tiny index's prefix was built
    index = {name: stages[name] for name in ("bm25", "embeddings", "knn_graph")}
    # resolution 4: ten groups of the twelve documents (the default finds the three topics)
    index["groups"] = {**stages["groups"], "resolution": 4.0, "summarizer": _spec(server)}
    path.write_text(yaml.safe_dump({"index": {**index, **(extra or {})}}))
    return path


@pytest.fixture
def setup(served, tiny_index, beir_dir, tmp_path, monkeypatch):
    """(common CLI arguments, a function copying the tiny index's prefix into a new folder)."""
    preset = _preset(tmp_path / "preset.yaml", served)

    def fresh(name: str):
        out = tmp_path / name
        shutil.copytree(tiny_index.path, out)
        return out

    monkeypatch.setenv("GAREN_CACHE_DIR", str(tmp_path / "cache-unused"))
    return ["--dataset", str(beir_dir), "--preset", str(preset)], fresh


def _files(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def _info(folder, stage: str) -> dict:
    return json.loads((folder / "manifest.json").read_text())["stages"][stage]["info"]


def _untimed(info: dict) -> dict:
    return {k: v for k, v in info.items() if k not in ("seconds", "partition_seconds")}


def _shard_dir(out, stage: str, name: str):
    return next((out / "shards" / stage).glob(f"*/{name}"))


def _index(common, out, *flags, cache=None, monkeypatch=None):
    if cache is not None:  # each process its own cache: only a shard's own records can spare a model call
        monkeypatch.setenv("GAREN_CACHE_DIR", str(cache))
    return main(["index", *common, "--out", str(out), *flags])


@pytest.mark.parametrize("count", [2, 3])
def test_sharded_summaries_merge_into_the_unsharded_stage_byte_for_byte(count, setup, served, tmp_path,
                                                                      monkeypatch, capsys):
    common, fresh = setup
    whole = fresh("whole")
    assert _index(common, whole, cache=tmp_path / "c-whole", monkeypatch=monkeypatch) == 0
    asked_unsharded = len(served.requests)
    groups = _info(whole, "groups")["groups"]
    assert asked_unsharded == groups == 10  # one prompt per group, every answer parsed

    sharded = fresh("sharded")
    for k in range(count, 0, -1):  # any order: each shard is its own process
        flags = ("--shard", f"{k}/{count}")
        assert _index(common, sharded, *flags, cache=tmp_path / f"c-{k}", monkeypatch=monkeypatch) == 0
    assert len(served.requests) - asked_unsharded == groups  # each prompt asked once, by one shard
    prompts = [json.dumps(r["body"]["messages"]) for r in served.requests]
    assert sorted(prompts[:asked_unsharded]) == sorted(prompts[asked_unsharded:])
    assert not (sharded / "groups").exists()  # shards write only under shards/
    capsys.readouterr()

    assert _index(common, sharded, "--merge-shards", cache=tmp_path / "c-merge", monkeypatch=monkeypatch) == 0
    assert len(served.requests) - asked_unsharded == groups  # the merge asks nothing
    assert _files(sharded / "groups") == _files(whole / "groups")
    manifests = [json.loads((f / "manifest.json").read_text())["stages"]["groups"] for f in (sharded, whole)]
    assert manifests[0]["files"] == manifests[1]["files"]  # sizes and digests
    info = _info(sharded, "groups")
    assert info.pop("summary_shards") == count
    assert _untimed(info) == _untimed(_info(whole, "groups"))
    assert not (sharded / "shards").exists()  # merged: the shards' answers are in the stage now


def test_a_finished_shard_run_again_asks_no_model_and_an_interrupted_one_asks_only_the_rest(
        setup, served, tmp_path, monkeypatch):
    common, fresh = setup
    out = fresh("index")
    assert _index(common, out, "--shard", "1/2", cache=tmp_path / "c1", monkeypatch=monkeypatch) == 0
    asked = len(served.requests)
    assert asked > 0
    assert _index(common, out, "--shard", "1/2", cache=tmp_path / "c-new", monkeypatch=monkeypatch) == 0
    assert len(served.requests) == asked  # a fresh cache: the shard's own record is what spares the calls

    # shard 2 killed after its first summary: its log holds one record and no finished.json
    assert _index(common, out, "--shard", "2/2", cache=tmp_path / "c2", monkeypatch=monkeypatch) == 0
    second = _shard_dir(out, "groups", "shard-2-of-2")
    lines = (second / "summaries.jsonl").read_text().splitlines()
    (second / "summaries.jsonl").write_text(lines[0] + "\n")
    (second / "finished.json").unlink()
    before = len(served.requests)
    assert _index(common, out, "--shard", "2/2", cache=tmp_path / "c2-new", monkeypatch=monkeypatch) == 0
    assert len(lines) == 5 and len(served.requests) - before == 4
    assert _index(common, out, "--merge-shards", cache=tmp_path / "c-merge", monkeypatch=monkeypatch) == 0
    assert (out / "groups" / "groups.jsonl").is_file()


def test_a_missing_or_unfinished_shard_is_one_line_naming_it(setup, tmp_path, monkeypatch, capsys):
    common, fresh = setup
    out = fresh("index")
    assert _index(common, out, "--shard", "1/3", cache=tmp_path / "c1", monkeypatch=monkeypatch) == 0
    assert _index(common, out, "--shard", "3/3", cache=tmp_path / "c3", monkeypatch=monkeypatch) == 0
    capsys.readouterr()
    assert _index(common, out, "--merge-shards") == 2
    line = one_error_line(capsys, "garen-infer index", alone=False)
    assert "stage 'groups': shard 2/3 is missing" in line and "--shard 2/3" in line
    assert not (out / "groups").exists()
    assert "groups" not in json.loads((out / "manifest.json").read_text())["stages"]

    assert _index(common, out, "--shard", "2/3", cache=tmp_path / "c2", monkeypatch=monkeypatch) == 0
    (_shard_dir(out, "groups", "shard-2-of-3") / "finished.json").unlink()
    capsys.readouterr()
    assert _index(common, out, "--merge-shards") == 2
    assert "shard 2/3 is not finished" in one_error_line(capsys, "garen-infer index", alone=False)


def test_shards_of_two_splits_or_a_stray_group_are_refused(setup, tmp_path, monkeypatch, capsys):
    common, fresh = setup
    out = fresh("index")
    for shard in ("1/2", "2/2", "1/3"):
        assert _index(common, out, "--shard", shard, cache=tmp_path / "c", monkeypatch=monkeypatch) == 0
    capsys.readouterr()
    assert _index(common, out, "--merge-shards") == 2
    line = one_error_line(capsys, "garen-infer index", alone=False)
    assert "holds shards of 2 splits (of 2 and of 3)" in line

    shutil.rmtree(_shard_dir(out, "groups", "shard-1-of-3"))
    first = _shard_dir(out, "groups", "shard-1-of-2") / "summaries.jsonl"
    second = first.parent.parent / "shard-2-of-2" / "summaries.jsonl"
    # shard 1 holding one of shard 2's groups
    first.write_text(first.read_text() + second.read_text().splitlines()[0] + "\n")
    assert _index(common, out, "--merge-shards") == 2
    line = one_error_line(capsys, "garen-infer index", alone=False)
    assert "shard 1/2 in" in line and "which is not its own" in line


def test_shards_of_another_summarizer_are_not_merged(setup, tmp_path, monkeypatch, capsys):
    common, fresh = setup
    out = fresh("index")
    assert _index(common, out, "--shard", "1/1", cache=tmp_path / "c", monkeypatch=monkeypatch) == 0
    capsys.readouterr()
    other = ["--set", "index.groups.summarizer.sampling.temperature=0.5"]
    assert _index(common + other, out, "--merge-shards") == 2
    line = one_error_line(capsys, "garen-infer index", alone=False)
    assert "no shards of this partition and summarizer" in line and "another partition or summarizer" in line
    # how the server is reached is not what a summary is: shards asked with another concurrency merge
    moved = ["--set", "index.groups.summarizer.concurrency=2"]
    assert _index(common + moved, out, "--merge-shards") == 0


@pytest.mark.parametrize("value", ["0/2", "3/2", "2", "a/b", "1/0"])
def test_bad_shard_values_are_one_line(value, setup, capsys):
    common, fresh = setup
    assert main(["index", *common, "--out", str(fresh("index")), "--shard", value]) == 2
    assert f"--shard '{value}': expected I/N" in one_error_line(capsys, "garen-infer index")


def test_a_shard_needs_the_prefix_and_a_stage_that_shards(setup, beir_dir, tmp_path, capsys):
    common, _ = setup
    assert main(["index", *common, "--out", str(tmp_path / "new"), "--shard", "1/2"]) == 2
    assert "--shard-prefix" in one_error_line(capsys, "garen-infer index")
    assert not (tmp_path / "new").exists()
    data = ["index", "--dataset", str(beir_dir)]
    assert main([*data, "--out", str(tmp_path / "x"), "--shard", "1/2", "--force"]) == 2
    assert "--shard with --force" in one_error_line(capsys, "garen-infer index")
    plain = tmp_path / "plain.yaml"
    plain.write_text("index:\n  bm25: {variant: bm25s, k1: 1.2, b: 0.75}\n")
    assert main([*data, "--preset", str(plain), "--out", str(tmp_path / "y"), "--shard-prefix"]) == 0
    capsys.readouterr()
    assert main([*data, "--preset", str(plain), "--out", str(tmp_path / "y"), "--shard", "1/2"]) == 2
    assert "no stage of this preset asks a model" in one_error_line(capsys, "garen-infer index")


def test_the_prefix_builds_what_the_shards_read_and_no_model_stage(served, beir_dir, tmp_path, monkeypatch,
                                                                   capsys):
    """--shard-prefix leaves out the summarised groups and the stages built from them (groups_random reads the
    groups' count); a shard of groups_random waits until the groups are merged, then shards in turn."""
    preset = _preset(tmp_path / "p.yaml", served, {"groups_random": {"summarizer": _spec(served)},
                                                   "corpus_files": {}})
    run = ["index", "--dataset", str(beir_dir), "--preset", str(preset), "--out", str(tmp_path / "index")]
    shards = tmp_path / "index" / "shards"
    monkeypatch.setenv("GAREN_CACHE_DIR", str(tmp_path / "cache"))
    assert main([*run, "--shard-prefix"]) == 0
    built = json.loads((tmp_path / "index" / "manifest.json").read_text())["stages"]
    assert set(built) == {"bm25", "embeddings", "knn_graph", "corpus_files"} and served.requests == []
    assert main([*run, "--shard", "1/1"]) == 0  # groups only: groups_random waits
    assert list(shards.iterdir()) == [shards / "groups"]
    assert main([*run, "--merge-shards"]) == 2  # groups merged, then groups_random has no shards yet
    capsys.readouterr()
    assert main([*run, "--shard", "1/1"]) == 0  # now groups_random shards
    assert list(shards.iterdir()) == [shards / "groups_random"]
    assert main([*run, "--merge-shards"]) == 0
    assert _info(tmp_path / "index", "groups")["summary_shards"] == 1
    assert _info(tmp_path / "index", "groups_random")["summary_shards"] == 1


def _is_level_prompt(request: dict) -> bool:
    return "levels of detail" in request["body"]["messages"][-1]["content"]


def test_the_top_down_tree_s_document_summaries_shard_and_the_merge_asks_only_the_clustering(
        server, tiny_index, beir_dir, tmp_path, monkeypatch):
    """LATTICE top-down: each document's level summaries are asked by one shard; the merge asks the clustering
    prompts (each waits for its parent's answer, so they do not shard) and writes the unsharded tree."""
    from tree_generators import ScriptedTreeBackend

    def tidy(body: dict) -> dict:  # level summaries by topic, clusters by topic
        return chat_answer(ScriptedTreeBackend.answer(body["messages"][-1]["content"]))

    server.answer((200, tidy))
    preset = tmp_path / "tree.yaml"
    tree = {"construction": "top-down", "max_children": 3, "min_clusters": 2,
            "summarizer": _spec(server, "tree")}
    embeddings = cpu_default_stages()["embeddings"]  # the tiny index's
    preset.write_text(yaml.safe_dump({"index": {"embeddings": embeddings, "semantic_tree": tree}}))
    common = ["--dataset", str(beir_dir), "--preset", str(preset)]
    whole, sharded = tmp_path / "whole", tmp_path / "sharded"
    for out in (whole, sharded):
        shutil.copytree(tiny_index.path, out)
    assert _index(common, whole, cache=tmp_path / "c-whole", monkeypatch=monkeypatch) == 0
    unsharded = list(server.requests)
    clusterings = sum(not _is_level_prompt(r) for r in unsharded)
    assert len(unsharded) - clusterings == 12 and clusterings > 0  # a level prompt per document, clusterings

    for k in (1, 2):
        flags = ("--shard", f"{k}/2")
        assert _index(common, sharded, *flags, cache=tmp_path / f"c-{k}", monkeypatch=monkeypatch) == 0
    assert [_is_level_prompt(r) for r in server.requests[len(unsharded):]] == [True] * 12  # each once
    assert _index(common, sharded, "--merge-shards", cache=tmp_path / "c-merge", monkeypatch=monkeypatch) == 0
    by_merge = server.requests[len(unsharded) + 12:]
    assert [_is_level_prompt(r) for r in by_merge] == [False] * clusterings  # the merge asks the clusterings
    assert _files(sharded / "semantic_tree") == _files(whole / "semantic_tree")
    info = _info(sharded, "semantic_tree")
    assert info.pop("level_shards") == 2 and info["level_fallbacks"] == 0
    assert not (sharded / "shards").exists()
    assert _untimed(info) == _untimed(_info(whole, "semantic_tree"))


def test_a_bottom_up_tree_with_an_llm_does_not_shard(served, tiny_index, beir_dir, tmp_path, capsys):
    preset = tmp_path / "tree.yaml"
    tree = {"construction": "bottom-up", "summarizer": _spec(served)}
    preset.write_text(yaml.safe_dump({"index": {"semantic_tree": tree}}))
    out = tmp_path / "index"
    shutil.copytree(tiny_index.path, out)
    assert main(["index", "--dataset", str(beir_dir), "--preset", str(preset), "--out", str(out),
                 "--shard", "1/2"]) == 2
    err = capsys.readouterr().err
    assert "bottom-up descriptions do not shard" in err and "no stage of this preset asks a model" in err
    assert served.requests == []
