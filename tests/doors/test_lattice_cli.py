"""LATTICE through ``garen-infer`` on the tiny corpus: ``index`` builds the tree stage in each construction mode,
``tree`` prints its outline, and ``run --method lattice`` walks it end to end, with a scripted LLM behind the
generator role (the paper's JSON slate path) and with cpu-default's real embedding scorer."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from garen_infer.configuration.presets import load_preset
from garen_infer.doors.cli import main
from garen_infer.llm.types import Completion

MODES = ("bottom-up", "top-down")


@pytest.fixture(scope="module")
def tree_indexes(beir_dir, tiny_model_dir, tmp_path_factory):
    """One index per construction mode. Top-down's generator is the tiny random Qwen3: its answers are never
    valid JSON, so the build takes every fallback, and says so in the manifest."""
    out = {}
    root = tmp_path_factory.mktemp("lattice-cli")
    for mode in MODES:
        preset = load_preset("cpu-default")
        tree = {"construction": mode, "max_children": 3, "min_clusters": 2}
        if mode == "top-down":
            tree.update(summarizer={"backend": "transformers", "model": str(tiny_model_dir), "device": "cpu",
                                    "sampling": {"max_tokens": 8}}, retries=0)
        preset["index"] = {"bm25": preset["index"]["bm25"], "embeddings": preset["index"]["embeddings"],
                           "semantic_tree": tree}
        path = root / f"{mode}.yaml"
        path.write_text(yaml.safe_dump(preset))
        out[mode] = (root / f"index-{mode}", path)
        assert main(["index", "--dataset", str(beir_dir), "--preset", str(path), "--out", str(out[mode][0])]) == 0
    return out


def test_index_builds_the_tree_stage_in_each_mode(tree_indexes, capsys):
    for mode in MODES:
        info = json.loads((tree_indexes[mode][0] / "manifest.json").read_text())["stages"]["semantic_tree"]["info"]
        assert info["construction"] == mode and info["leaves"] == 12 and info["fanout"]["max"] <= 3
    top_down = json.loads((tree_indexes["top-down"][0] / "manifest.json").read_text())["stages"][
        "semantic_tree"
    ]["info"]
    assert top_down["summarizer"].startswith("transformers:") and top_down["level_fallbacks"] == 12
    assert top_down["partition_fallbacks"] >= 1
    assert (tree_indexes["top-down"][0] / "semantic_tree" / "doc_levels.jsonl").is_file()

    capsys.readouterr()
    assert main(["tree", "--index", str(tree_indexes["bottom-up"][0]), "--depth", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert re.match(r"semantic tree \(bottom-up, descriptions: \d+ extractive\): 12 documents", lines[0])
    assert lines[1].startswith("[0] (root)") and all(line.startswith("  [") for line in lines[2:])


class KeywordLLM:
    """A scripted generator: reads the slate prompt and scores each candidate by the share of query words it
    contains, answering the paper's JSON."""

    name = "keyword-llm"

    def generate(self, chats):
        out = []
        for chat in chats:
            prompt = chat[-1]["content"]
            query = set(re.findall(r"\w+", prompt.split("## Query\n", 1)[1].split("\n", 1)[0].lower()))
            scores = []
            for i, text in re.findall(r"^\[(\d+)\]\. (.*)$", prompt, re.MULTILINE):
                words = set(re.findall(r"\w+", text.lower()))
                scores.append([int(i), round(100 * len(query & words) / len(query))])
            answer = {"reasoning": "word overlap",
                      "ranking": [i for i, _ in sorted(scores, key=lambda p: -p[1])], "relevance_scores": scores}
            out.append(Completion(text=json.dumps(answer), input_tokens=len(prompt.split()), output_tokens=20))
        return out


@pytest.mark.parametrize("mode", MODES)
def test_run_lattice_with_a_scripted_llm(mode, tree_indexes, beir_dir, tmp_path, monkeypatch, capsys):
    from garen_infer.llm import roles

    monkeypatch.setattr(roles, "build_roles", lambda *args, **kwargs: roles.Roles(generator=KeywordLLM()))
    index, preset = tree_indexes[mode]
    out = tmp_path / "run"
    code = main(["run", "--dataset", f"beir:{beir_dir}", "--preset", str(preset), "--index", str(index),
                 "--method", "lattice",
                 "--set", "methods.lattice.slate_scorer=generator", "--set",
                 "models.generator={backend: transformers, model: scripted}",
                 "--budget", "8", "--out", str(out), "--no-cache"])
    assert code == 0, capsys.readouterr().err
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["queries"] == 4 and metrics["nDCG@10"] > 0.5
    trace = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    for record in trace:
        generator = record["ledger"]["roles"]["generator"]
        assert generator["model_calls"] == record["trace"]["slates"] + record["trace"]["failed_slates"] > 0
        assert generator["input_tokens"] > 0 and record["ledger"]["budget_used"] <= 8
        assert len(record["ranking"]) == record["trace"]["leaves_ranked"] <= 8
    q3 = next(r for r in trace if r["qid"] == "q3")
    assert "py2" not in q3["ranking"]  # q3 excludes py2


def test_run_lattice_and_lattice_plus_plus_on_cpu_default(tree_indexes, beir_dir, tmp_path, capsys):
    index, preset = tree_indexes["bottom-up"]
    for method in ("lattice", "lattice++"):
        out = tmp_path / method
        assert main(["run", "--dataset", f"beir:{beir_dir}", "--preset", str(preset), "--index", str(index),
                     "--method", method, "--budget", "6", "--out", str(out), "--no-cache"]) == 0
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["mean_budget_used"] <= 6 and metrics["nDCG@10"] > 0.5
        trace = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
        assert all(set(r["ledger"]["roles"]) == {"navigator"} for r in trace)
        if method == "lattice++":  # BM25 and dense add documents the tree search never showed
            assert metrics["mean_leaves_ranked"] <= 6 < min(len(r["ranking"]) for r in trace)


def test_a_missing_tree_stage_is_one_clear_line(beir_dir, tmp_path, capsys):
    preset = tmp_path / "bm25.yaml"
    base = load_preset("cpu-default")
    base["index"] = {"bm25": base["index"]["bm25"]}
    preset.write_text(yaml.safe_dump(base))
    assert main(["index", "--dataset", str(beir_dir), "--preset", str(preset), "--out", str(tmp_path / "index")]) == 0
    capsys.readouterr()
    code = main(["run", "--dataset", str(beir_dir), "--preset", str(preset), "--index", str(tmp_path / "index"),
                 "--method", "lattice", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "needs the index stage 'semantic_tree'" in err[0]


def test_the_embedding_scorer_reuses_the_index_vectors_of_corpus_documents(tiny_index, tiny_dataset):
    """Scoring a corpus document's text equals encoding it afresh; it only skips the encoding."""
    import numpy as np

    from garen_infer.llm.roles import EmbeddingYesNoScorer, ScoreJob

    texts = [d.full_text for d in tiny_dataset.documents]
    reusing = EmbeddingYesNoScorer(tiny_index.embedder, texts, tiny_index.embeddings)
    encoding = EmbeddingYesNoScorer(tiny_index.embedder)
    pairs = [ScoreJob("why do volcanoes erupt", texts[0]), ScoreJob("python lists", texts[8]),
             ScoreJob("python lists", "a text outside the corpus")]
    np.testing.assert_allclose([c.score for c in reusing.score(pairs)],
                               [c.score for c in encoding.score(pairs)], atol=1e-5)
    assert set(reusing._text_vectors) == set(encoding._text_vectors)
