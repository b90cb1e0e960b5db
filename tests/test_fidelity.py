"""Issue 12: BRIGHT as published. Each test pins one fidelity fix on a hand-built case."""

from __future__ import annotations

import json
import shutil

import pytest

from garen_infer.llm.roles import Roles
from garen_infer.llm.types import Completion
from garen_infer.runner import RunConfig, execute


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
    config = RunConfig(method=method, method_options=options, budget=budget, first_stage={"kind": "bm25", "depth": 1000})
    execute(dataset, index, config, tmp_path / method, roles=Roles(reranker=reranker), log=lambda *_: None)
    return reranker, [json.loads(line) for line in (tmp_path / method / "trace.jsonl").read_text().splitlines()]


# ---- item 2: excluded ids leave the first stage before a method sees it ------------------------------------------
def test_excluded_ids_never_reach_the_reranker(tiny_dataset, tiny_index, tmp_path):
    from garen_infer.first_stage import FirstStageConfig, first_stage

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
    from garen_infer.index.partition import leiden_groups

    neighbours, weights = barbells()
    uncapped = leiden_groups(neighbours, weights, max_group_size=10_000, backend=backend)
    assert sorted(map(len, uncapped)) == [20] * 30  # a component of exactly s-bar = 20 documents
    default = leiden_groups(neighbours, weights, max_group_size=20, backend=backend)
    assert max(map(len, default)) == 10 and len(default) == 60  # ">= s-bar" is re-partitioned (App. F: max 19)
    exceeding = leiden_groups(neighbours, weights, max_group_size=20, backend=backend, cap_rule="exceeding")
    assert sorted(map(len, exceeding)) == [20] * 30  # App. A's wording keeps it
