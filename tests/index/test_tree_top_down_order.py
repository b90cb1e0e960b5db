"""LATTICE's top-down tree is built by dependencies (a node's clustering prompt is asked as soon as its parent's
partition is in), and the tree does not depend on that order: it equals the per-depth build, nodes, descriptions,
k-means fallbacks and counts, whether answers arrive in the order asked or not. An interrupted build keeps every
answer it got."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from tree_generators import (
    Lanes,
    MessyTreeBackend,
    ScriptedGenerator,
    ScriptedTreeBackend,
    per_depth_build,
    synthetic_corpus,
)

from garen_infer.errors import GarenError
from garen_infer.index.tree.semantic_tree import SemanticTree
from garen_infer.index.tree.semantic_tree_stage import SemanticTreeParams
from garen_infer.index.tree.tree_top_down import TopDownBuilder
from garen_infer.llm.backends import CachedBackend
from garen_infer.llm.cache import ResponseCache

# the per-depth build's tree of the messy case (below), as the code before the dependency-driven build wrote it
WRITTEN = Path(__file__).resolve().parents[1] / "fixtures" / "top_down_tree"
MESSY = SemanticTreeParams(construction="top-down", max_children=6, min_clusters=3, retries=1,
                           clustering_context_words=20,
                           batch_size=8)
WAIT = 10.0  # seconds a held answer waits for the prompt it expects (a failure, not a hang)


def built_files(builder: TopDownBuilder, build, folder: Path) -> dict[str, str]:
    """The tree's nodes.jsonl and meta.json (with the counts the stage's manifest keeps) as ``build`` makes it."""
    root, levels = build(builder)
    meta = {**vars(builder.stats), "answer_problems": dict(builder.generator.problems)}
    folder.mkdir()
    SemanticTree.from_built(root, meta).save(folder, [f"doc{i}" for i in range(len(builder.texts))])
    return {name: (folder / name).read_text() for name in ("nodes.jsonl", "meta.json")} | {"levels": json.dumps(levels)}


def messy_builder(backend) -> TopDownBuilder:
    texts, vectors = synthetic_corpus()
    return TopDownBuilder(texts, vectors, ScriptedGenerator(backend), MESSY, log=lambda m: None)


@pytest.mark.parametrize("case", ["tidy", "broken", "messy", "messy on a server"])
def test_the_tree_is_the_per_depth_build(case, tiny_dataset, tiny_index, tmp_path):
    def builder() -> TopDownBuilder:
        if case.startswith("messy"):
            return messy_builder(Lanes(MessyTreeBackend()) if "server" in case else MessyTreeBackend())
        params = SemanticTreeParams(construction="top-down", max_children=3, min_clusters=2, retries=1)
        texts = [d.full_text for d in tiny_dataset.documents]
        generator = ScriptedGenerator(ScriptedTreeBackend(broken=case == "broken"))
        return TopDownBuilder(texts, tiny_index.embeddings, generator, params, log=lambda m: None)

    by_depth = built_files(builder(), per_depth_build, tmp_path / "per-depth")
    assert built_files(builder(), TopDownBuilder.build, tmp_path / "now") == by_depth
    meta = json.loads(by_depth["meta.json"])
    if case == "broken":
        assert meta["level_fallbacks"] == 12 and meta["partition_fallbacks"] >= 2
    if case.startswith("messy"):  # every kind of fallback is exercised
        assert all(meta[kind] for kind in ("level_fallbacks", "partition_fallbacks", "no_level_fits", "unassigned"))
        assert meta["partition_fallbacks"] > meta["no_level_fits"]  # some nodes' answers were unusable


@pytest.mark.parametrize("engine", ["local", "server"])
def test_the_tree_equals_the_one_the_per_depth_build_wrote(engine, tmp_path):
    """Against the files the per-depth code wrote: on a server whose answers come back out of the order asked."""
    backend = Lanes(MessyTreeBackend(), slots=8, most=0.03) if engine == "server" else MessyTreeBackend()
    files = built_files(messy_builder(backend), TopDownBuilder.build, tmp_path / "tree")
    assert files["nodes.jsonl"] == (WRITTEN / "nodes.jsonl").read_text()
    assert json.loads(files["meta.json"]) == json.loads((WRITTEN / "meta.json").read_text())
    if engine == "server":
        clustering = [p for p in backend.answered if "topic descriptions" in p]
        asked = [p for p, _ in backend.received if "topic descriptions" in p]
        assert clustering != asked  # answers did come back out of the order asked


class Held(Lanes):
    """Holds the answer to ``hold`` until one of the prompts ``until`` comes in (or ``WAIT`` passes)."""

    def __init__(self, backend, hold: str, until: set[str]):
        super().__init__(backend, slots=8, most=0.005)
        self.hold, self.until, self.arrived = hold, until, threading.Event()
        self.released: bool | None = None

    def generate(self, chats, params):
        text = chats[0][-1]["content"]
        if text in self.until:
            self.arrived.set()
        if text == self.hold and self.released is None:
            self.released = self.arrived.wait(WAIT)
        return super().generate(chats, params)


def test_a_depth_does_not_wait_for_the_slowest_answer_above_it(tmp_path):
    """While one depth-1 node's answer is held, nodes of depth 2 beneath its siblings are asked."""
    by_depth: list[list[str]] = []
    per_depth_build(messy_builder(MessyTreeBackend()), by_depth)
    assert len(by_depth) >= 3 and by_depth[2]
    backend = Held(MessyTreeBackend(), hold=by_depth[1][0], until=set(by_depth[2]))
    files = built_files(messy_builder(backend), TopDownBuilder.build, tmp_path / "tree")
    assert backend.released is True  # a depth-2 prompt came in while the depth-1 answer was held
    assert files["nodes.jsonl"] == (WRITTEN / "nodes.jsonl").read_text()


class FailsOnce(MessyTreeBackend):
    """Refuses ``prompt`` (the server went away), every time."""

    def __init__(self, prompt: str):
        super().__init__()
        self.prompt = prompt

    def generate(self, chats, params):
        if chats[0][-1]["content"] == self.prompt:
            raise GarenError("generator: the server closed the connection")
        return super().generate(chats, params)


def test_an_interrupted_build_keeps_every_answer_it_got(tmp_path):
    by_depth: list[list[str]] = []
    per_depth_build(messy_builder(MessyTreeBackend()), by_depth)
    cache = ResponseCache(tmp_path / "cache.sqlite")
    first = Lanes(FailsOnce(by_depth[2][0]), slots=8, most=0.005)
    with pytest.raises(GarenError, match="closed the connection"):
        messy_builder(CachedBackend(first, cache)).build()
    again = Lanes(MessyTreeBackend(), slots=8, most=0.005)
    files = built_files(messy_builder(CachedBackend(again, cache)), TopDownBuilder.build, tmp_path / "tree")
    answered = {asked for asked in first.received if asked[0] != by_depth[2][0]}
    assert answered and not answered & set(again.received)  # nothing answered before the failure is asked again
    assert (by_depth[2][0], 0.0) in again.received
    assert files["nodes.jsonl"] == (WRITTEN / "nodes.jsonl").read_text()
