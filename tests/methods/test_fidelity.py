"""BRIGHT as published. Each test pins one fidelity fix on a hand-built case."""

from __future__ import annotations

import json
import shutil

import pytest

from garen_infer.llm.roles import Roles
from garen_infer.llm.types import Completion
from garen_infer.running.runner import RunConfig
from garen_infer.running.session import execute


class RecordingReranker:
    """Keeps every window it is asked about and answers with the window unchanged."""

    def __init__(self):
        self.windows: list[tuple[int, ...]] = []
        self.by_query: dict[str, list[tuple[int, ...]]] = {}

    def rerank(self, jobs):
        for job in jobs:
            self.windows.append(job.rows)
            self.by_query.setdefault(job.query, []).append(job.rows)
        return [(list(job.rows), Completion()) for job in jobs]


def _run(dataset, index, tmp_path, method, options, budget=4):
    reranker = RecordingReranker()
    config = RunConfig.build(method=method, method_options=options, budget=budget,
                             first_stage={"kind": "bm25", "depth": 1000})
    execute(dataset, index, config, tmp_path / method, roles=Roles(reranker=reranker), log=lambda *_: None)
    return reranker, [json.loads(line) for line in (tmp_path / method / "trace.jsonl").read_text().splitlines()]


# ---- item 2: excluded ids leave the first stage before a method sees it ------------------------------------------
def test_excluded_ids_never_reach_the_reranker(tiny_dataset, tiny_index, tmp_path):
    from garen_infer.index.first_stage import FirstStageConfig, first_stage

    py2 = tiny_dataset.doc_index["py2"]
    q3 = next(q for q in tiny_dataset.queries if q.id == "q3")  # "python dictionary key lookup", excludes py2
    assert first_stage(tiny_index, [q3.text], FirstStageConfig())[0][0] == py2  # BM25 ranks it first
    full = first_stage(tiny_index, [q3.text], FirstStageConfig(depth=2))[0]
    dropped = first_stage(tiny_index, [q3.text], FirstStageConfig(depth=2), [{py2}])[0]
    assert dropped == first_stage(tiny_index, [q3.text], FirstStageConfig(depth=3))[0][1:] and full[0] == py2
    reranker, records = _run(tiny_dataset, tiny_index, tmp_path, "rerank", {})
    assert reranker.by_query[q3.text] == [tuple(first_stage(tiny_index, [q3.text], FirstStageConfig(), [{py2}])[0][:4])]
    assert py2 not in reranker.by_query[q3.text][0]


@pytest.fixture(scope="module")
def graph_index(tiny_dataset, tiny_index, tmp_path_factory):
    """The tiny index plus the DiskANN proximity graph RGS searches."""
    from garen_infer.index.folder import IndexFolder
    from garen_infer.index.stages import IndexConfig

    path = tmp_path_factory.mktemp("graph") / "index"
    shutil.copytree(tiny_index.path, path)
    return IndexFolder.build(tiny_dataset, path, IndexConfig.from_dict({"proximity_graph": {}}), log=lambda *_: None)


@pytest.mark.parametrize("first_stage", ["run", "graph"])
def test_rgs_author_code_keeps_excluded_ids_behind_its_switch(tiny_dataset, graph_index, tmp_path, first_stage):
    py2, q3 = tiny_dataset.doc_index["py2"], "python dictionary key lookup"
    options = {"first_stage": first_stage, "seeds": 4}
    reranker, _ = _run(tiny_dataset, graph_index, tmp_path / "keep", "rgs", {**options, "excluded": "keep"})
    assert any(py2 in w for w in reranker.by_query[q3])
    reranker, _ = _run(tiny_dataset, graph_index, tmp_path / "drop", "rgs", options)
    assert all(py2 not in w for w in reranker.by_query[q3])


# ---- item 3: the group-size cap ---------------------------------------------------------------------------------
def barbells(count: int = 30, half: int = 10):
    """``count`` components, each two ``half``-cliques joined by three edges: the whole graph's Leiden keeps each
    component as one group of 2 x half (merging beats modularity's resolution limit), its own subgraph splits it."""
    import numpy as np

    rows = []
    for c in range(count):
        base = c * 2 * half
        for side in (0, 1):
            clique = [base + side * half + i for i in range(half)]
            for i, node in enumerate(clique):
                mates = [m for m in clique if m != node]
                if i < 3:  # the bridges
                    mates.append(base + (1 - side) * half + i)
                rows.append(mates + [node] * (half - len(mates)))
    return np.array(rows, dtype=np.uint32), np.ones((len(rows), half), dtype=np.float16)


@pytest.mark.parametrize("backend", ["graspologic", "leidenalg"])
def test_groups_of_exactly_the_cap_are_split_like_graspologic(backend):
    from garen_infer.index.grouping.partition import leiden_groups

    neighbours, weights = barbells()
    uncapped = leiden_groups(neighbours, weights, max_group_size=10_000, backend=backend)
    assert sorted(map(len, uncapped)) == [20] * 30  # a component of exactly s-bar = 20 documents
    default = leiden_groups(neighbours, weights, max_group_size=20, backend=backend)
    assert max(map(len, default)) == 10 and len(default) == 60  # ">= s-bar" is re-partitioned (App. F: max 19)
    exceeding = leiden_groups(neighbours, weights, max_group_size=20, backend=backend, cap_rule="exceeding")
    assert sorted(map(len, exceeding)) == [20] * 30  # App. A's wording keeps it


# ---- item 7: what the group summarizer reads --------------------------------------------------------------------
def test_summarizer_reads_every_document_whole_while_the_group_fits():
    from garen_infer.index.grouping.groups import GroupParams
    from garen_infer.index.grouping.summaries import fit_documents

    params = GroupParams()
    texts = [" ".join(f"w{d}_{i}" for i in range(200)) for d in range(30)]  # 30 documents of 200 words
    shown = fit_documents(texts, params.summary_max_docs, params.summary_max_words, params.summary_budget_words)
    assert shown == texts  # App. G: "The following {n} documents" -- all of them (was: 20 documents x 150 words)
    # past the budget every document is cut to one common length; the short ones stay whole
    mixed = ["short text"] + [" ".join(["long"] * 500)] * 3
    cut = fit_documents(mixed, None, None, budget_words=902)
    assert cut[0] == "short text" and [len(t.split()) for t in cut[1:]] == [300, 300, 300]
    assert fit_documents(texts, 2, 5, None) == [" ".join(t.split()[:5]) for t in texts[:2]]
    exactly = [" ".join(["word"] * 10)] * 3
    assert fit_documents(exactly, None, None, budget_words=30) == exactly  # a group exactly at the budget fits whole


def test_summarizer_prompt_is_built_from_the_fitted_documents():
    from garen_infer.index.grouping.groups import GroupParams, _llm_summaries
    from garen_infer.llm.types import SamplingParams

    class CapturingGenerator:
        sampling, chats = SamplingParams(), []
        backend = None

        def __init__(self):
            self.backend = self

        def generate(self, chats, sampling):
            self.chats.extend(chats)
            return [Completion(text='{"concept": "c", "summary": "s"}') for _ in chats]

    texts = [f"document {d} " + "word " * 200 for d in range(25)]
    generator = CapturingGenerator()
    # answers as they come
    list(_llm_summaries(generator, [0], [list(range(25))], texts, GroupParams(summarizer={"backend": "vllm"})))
    user = generator.chats[0][1]["content"]
    assert "The following 25 documents" in user and "[25] document 24" in user and user.count("word") >= 25 * 200


# ---- item 11: choosing the reasoning prompt sets p = 0.5 and a longer answer --------------------------------------
def test_reasoning_prompt_settles_rbp_p_and_max_tokens(tiny_index):
    from garen_infer.llm.cache import NoCache
    from garen_infer.llm.roles import build_roles
    from garen_infer.methods.garen import Garen, GarenConfig

    reasoning = {"reranker": {"backend": "openai", "base_url": "http://127.0.0.1:9", "model": "m",
                              "prompt": "garen-reasoning",
                              "api_key_env": None, "sampling": {"temperature": 0.0}}}
    assert Garen.settle(GarenConfig(), reasoning).rbp_p == 0.5
    assert Garen.settle(GarenConfig(), {"reranker": {"prompt": "garen"}}).rbp_p == 0.6
    assert Garen.settle(GarenConfig(rbp_p=0.7), reasoning).rbp_p == 0.7  # an explicit value wins
    roles = build_roles(reasoning, ["doc"], tiny_index, NoCache())
    assert roles.reranker.sampling.max_tokens == 4096
    reasoning["reranker"].update(prompt="garen")
    assert build_roles(reasoning, ["doc"], tiny_index, NoCache()).reranker.sampling.max_tokens == 200


# ---- item 4: one preset for every implemented row of GAREN's Table 1 ----------------------------------------------
def test_garen_paper_preset_runs_every_table_1_method_from_bm25():
    from garen_infer.configuration.presets import load_preset
    from garen_infer.index.stages import IndexConfig
    from garen_infer.methods.base import get_method, make_config

    preset = load_preset("garen-paper")
    stages = IndexConfig.from_dict(preset["index"]).stages
    assert stages["proximity_graph"].start == "medoid"  # RGS's DiskANN graph over the Qwen3 embeddings
    assert stages["embeddings"].model == "Qwen/Qwen3-Embedding-4B" and preset["first_stage"]["kind"] == "bm25"
    assert set(preset["methods"]) >= {"bm25", "rerank", "slidegar", "rgs", "garen"}
    rgs = make_config(get_method("rgs"), preset["methods"]["rgs"])
    assert rgs.first_stage == "run" and rgs.budget == 100  # seeds from BM25, like every method (sec. 5)
    for method in preset["methods"]:
        cls = get_method(method)
        assert set(cls.index_stages) <= set(stages), method  # every stage a method needs is built by the preset
