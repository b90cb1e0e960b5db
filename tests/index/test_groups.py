"""GAREN's offline groups: Leiden with recursive re-partitioning, the App. C.2 controls, and summaries."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pytest

from garen_infer.index.grouping.partition import group_stats, kmeans_groups, leiden_groups, random_groups
from garen_infer.index.grouping.summaries import ExtractiveSummarizer, parse_summary
from garen_infer.llm.types import Completion, SamplingParams


def planted_graph(n_clusters=3, size=45, k=8, seed=0):
    """k-NN rows of points around n_clusters well separated centres (a real exact k-NN graph)."""
    from garen_infer.index.knn_graph import KnnGraph

    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_clusters, 16)) * 5
    points = np.concatenate([c + rng.normal(size=(size, 16)) for c in centres]).astype(np.float32)
    points /= np.linalg.norm(points, axis=1, keepdims=True)
    graph = KnnGraph.build(points, k)
    return graph, points


@pytest.mark.parametrize("backend", ["graspologic", "leidenalg"])
def test_leiden_partitions_every_document_into_small_groups(backend):
    graph, _ = planted_graph()
    groups = leiden_groups(graph.neighbours, graph.weights, max_group_size=20, backend=backend)
    rows = sorted(r for g in groups for r in g)
    assert rows == list(range(135))  # a partition: every document exactly once
    assert max(len(g) for g in groups) <= 20  # 45-document clusters were re-partitioned
    for g in groups:  # groups never straddle the planted clusters
        assert len({r // 45 for r in g}) == 1
    assert groups == leiden_groups(graph.neighbours, graph.weights, max_group_size=20, backend=backend)  # seeded


def test_a_group_leiden_cannot_split_stays_large():
    # 30 identical documents: a clique that no partition improves (App. F's "near-identical" large groups)
    from garen_infer.index.knn_graph import KnnGraph

    points = np.ones((30, 4), dtype=np.float32) / 2
    graph = KnnGraph.build(points, 29)
    groups = leiden_groups(graph.neighbours, graph.weights, max_group_size=20)
    assert sorted(r for g in groups for r in g) == list(range(30))


def test_controls_have_the_requested_number_of_groups():
    _, points = planted_graph()
    for groups in (kmeans_groups(points, 9), random_groups(135, 9)):
        assert len(groups) == 9 and sorted(r for g in groups for r in g) == list(range(135))
    assert group_stats([[0, 1], [2, 3, 4]]) == {"groups": 2, "min": 2, "max": 3, "mean": 2.5}


def test_parse_summary_repairs_real_model_mistakes():
    fenced = (
        '```json\n{"detailed_fingerprints": [], "concept": "Hand hygiene", "summary": "WHO guidance on '
        'washing.",}\n```'
    )
    assert parse_summary(fenced) == {"concept": "Hand hygiene", "summary": "WHO guidance on washing."}
    truncated = '{"concept": "Kelvin equation", "summary": "Vapour pressure over curved interfaces'
    assert parse_summary(truncated)["concept"] == "Kelvin equation"
    assert parse_summary("I cannot help with that.") is None
    assert parse_summary('{"concept": "x"}') is None  # no summary: not usable


def test_extractive_summary_is_deterministic_and_names_key_terms():
    texts = [
        "Cones respond to light of different wavelengths. They work in bright light.",
        "Rod cells work better in dim light. Rods are photoreceptors.",
        "Photoreceptors convert light into signals. Cones and rods are photoreceptors.",
        "Stock markets fell sharply today. Investors sold shares.",
    ]
    vectors = np.eye(4, dtype=np.float32)[[0, 0, 0, 1]] + 0.01
    summarizer = ExtractiveSummarizer(texts, vectors)
    first = summarizer.summarize([0, 1, 2])
    assert first == summarizer.summarize([0, 1, 2])
    assert "photoreceptors" in first["concept"]
    assert first["summary"].startswith(("Cones", "Rod", "Photoreceptors"))


@dataclass
class ScriptedBackend:
    """Stands in for the generator's model: answers from a script, one reply per attempt."""

    replies: list[str]
    id: str = "scripted"

    def generate(self, chats, params):
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        return [Completion(text=reply) for _ in chats]


@dataclass
class ScriptedGenerator:
    backend: ScriptedBackend
    sampling: SamplingParams = SamplingParams()
    problems: Counter = field(default_factory=Counter)
    name: str = "scripted"


def test_llm_summaries_retry_then_give_up():
    from garen_infer.index.grouping.groups import GroupParams, _llm_summaries

    texts = ["a doc", "b doc"]
    good = '{"concept": "Letters", "summary": "Documents about letters."}'
    retried = dict(_llm_summaries(ScriptedGenerator(ScriptedBackend(["not json", good])), [0], [[0, 1]],
                                  texts, GroupParams()))
    assert retried[0] == {"concept": "Letters", "summary": "Documents about letters."}
    hopeless = dict(_llm_summaries(ScriptedGenerator(ScriptedBackend(["no"])), [0], [[0, 1]], texts,
                                   GroupParams(summary_retries=2)))
    assert hopeless[0] is None  # the caller then uses the extractive summary and counts a fallback


def test_a_summary_cut_at_max_tokens_is_not_kept_but_asked_again_and_counted():
    """JSON repair would close a cut answer and keep its summary cut mid-sentence."""
    from garen_infer.index.grouping.groups import GroupParams, _llm_summaries

    cut = '{"concept": "Volcanoes", "summary": "Documents about lava flows and the'
    good = '{"concept": "Volcanoes", "summary": "Documents about lava flows."}'

    class CutFirst(ScriptedBackend):
        def generate(self, chats, params):
            return [
                Completion(c.text, finish_reason="length" if c.text == cut else "stop")
                for c in super().generate(chats, params)
            ]

    generator = ScriptedGenerator(CutFirst([cut, good]))
    assert (
        dict(_llm_summaries(generator, [0], [[0, 1]], ["a", "b"], GroupParams()))[0]["summary"]
        == "Documents about lava flows."
    )
    assert generator.problems == {"cut_at_max_tokens": 1}
    generator = ScriptedGenerator(CutFirst([cut]))
    assert dict(_llm_summaries(generator, [0], [[0, 1]], ["a", "b"], GroupParams(summary_retries=1)))[0] is None
    assert generator.problems == {"cut_at_max_tokens": 2}
    generator = ScriptedGenerator(ScriptedBackend(["Sure! Here is a summary of the documents."]))
    dict(_llm_summaries(generator, [0], [[0, 1]], ["a", "b"], GroupParams(summary_retries=0)))
    assert generator.problems == {"unreadable": 1}


def test_groups_stage_with_a_real_llm_summarizer_falls_back_and_resumes(
    tiny_dataset, tiny_index, tiny_model_dir, tmp_path, monkeypatch
):
    """The groups stage on the tiny corpus, summarised by a real (tiny, untrained) transformers model: its output
    is not JSON, so every group ends with the extractive fallback, counted in the manifest. A second build with a
    partial file already holding group 0 keeps that summary instead of asking again."""
    import json
    import shutil

    from garen_infer.index.folder import IndexFolder
    from garen_infer.index.stages import IndexConfig

    monkeypatch.setenv("GAREN_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "index"
    shutil.copytree(tiny_index.path, folder)
    summarizer = {"backend": "transformers", "model": str(tiny_model_dir), "device": "cpu",
                  "sampling": {"max_tokens": 8}}
    config = IndexConfig.from_dict({"groups": {"max_group_size": 4, "summarizer": summarizer, "summary_retries": 1}})
    built = IndexFolder.build(tiny_dataset, folder, config, log=lambda m: None)
    info = built.manifest["stages"]["groups"]["info"]
    assert info["summary_fallbacks"] == info["groups"] and info["max"] <= 4
    records = [json.loads(line) for line in (folder / "groups" / "groups.jsonl").read_text().splitlines()]
    assert all(r["summarizer"] == "extractive" and r["summary"] for r in records)
    assert sorted(d for r in records for d in r["docs"]) == sorted(tiny_dataset.doc_ids)

    # resume: pretend an earlier build was interrupted after summarising group 0
    groups = [[tiny_dataset.doc_index[d] for d in r["docs"]] for r in records]
    import hashlib

    digest = hashlib.sha256(json.dumps(groups).encode()).hexdigest()[:12]
    partial = folder / f".groups.{digest}.partial.jsonl"
    partial.write_text(json.dumps({"group": 0, "concept": "kept", "summary": "from the interrupted build",
                                   "summarizer": "earlier"}) + "\n")
    rebuilt = IndexFolder.build(tiny_dataset, folder, config, force=True, log=lambda m: None)
    assert rebuilt.groups().concepts[0] == "kept" and not partial.exists()
