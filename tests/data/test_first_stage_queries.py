"""First stages that search with a rewritten query (first_stage.query): BRIGHT's published reasoning queries
through a local copy in the hub's layout, and a column of a JSONL/BEIR queries file. The models downstream read
the original query; only the pool changes."""

from __future__ import annotations

import json

import pytest

from garen_infer.data.bright import load_reasoning_queries
from garen_infer.data.query_texts import rewritten_queries
from garen_infer.errors import GarenError
from garen_infer.index.first_stage import FirstStageConfig, first_stage, first_stage_texts
from garen_infer.running.runner import RunConfig, configure_method, query_states

REASONED = [  # BRIGHT's `<model>_reason` rows: the examples' fields with `query` rewritten and a `reasoning` column
    {"id": "0", "query": "Light drives photosynthesis in chloroplasts.", "reasoning": "r", "gold_ids": [],
     "gold_ids_long": [], "excluded_ids": ["N/A"]},
    {"id": "1", "query": "Anthocyanins and chlorophyll breakdown in autumn leaves.", "reasoning": "r", "gold_ids": [],
     "gold_ids_long": [], "excluded_ids": ["N/A"]},
]


@pytest.fixture
def bright_copy(tmp_path, monkeypatch):
    """A local copy of xlangai/BRIGHT's gpt4_reason configuration (<config>/<task>-*.parquet); the hub name is
    served from it, so nothing is downloaded, and each configuration and split asked for is recorded."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets-cache")
    root = tmp_path / "BRIGHT"
    (root / "gpt4_reason").mkdir(parents=True)
    datasets.Dataset.from_list(REASONED).to_parquet(str(root / "gpt4_reason" / "biology-00000-of-00001.parquet"))
    real, asked = datasets.load_dataset, []

    def load_dataset(path, name=None, split=None, revision=None, **kwargs):
        if path != "xlangai/BRIGHT":
            return real(path, name, split=split, **kwargs)
        asked.append((name, split, revision))
        return real("parquet", data_files=sorted(str(f) for f in (root / name).glob(f"{split}-*.parquet")),
                    split="train")

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return root, asked


def test_bright_reasoning_queries_by_model(bright_copy):
    root, asked = bright_copy
    expected = {"0": REASONED[0]["query"], "1": REASONED[1]["query"]}
    assert load_reasoning_queries("biology", "gpt4", source=str(root)) == expected
    assert rewritten_queries("bright:gpt4", "bright/biology") == expected  # the hub name, as BRIGHT's run.py loads it
    assert asked == [("gpt4_reason", "biology", None)]
    assert rewritten_queries(f"bright:gpt4@{root}", "bright/biology:long") == expected  # a local copy; long documents


@pytest.mark.parametrize("spec, dataset, message", [
    ("bright:gpt5", "bright/biology", "no reasoning queries by 'gpt5'; BRIGHT publishes gpt4, claude-3-opus"),
    ("bright:gpt4", "scifact", "need a bright:<task> dataset, not 'scifact'"),
    ("rewrites.jsonl", "scifact", "use original, bright:<model>"),
])
def test_bad_sources_are_refused_in_one_line(spec, dataset, message):
    with pytest.raises(GarenError, match=message.replace("(", r"\(")):
        rewritten_queries(spec, dataset)


def write_rewrites(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


REWRITES = [  # every query rewritten towards the Python documents
    {"_id": "q1", "text": "why do volcanoes erupt", "metadata": {"rewrite": "python generator yield values lazily"}},
    {"_id": "q2", "text": "plants", "metadata": {"rewrite": "python list append sort"}},
    {"_id": "q3", "text": "python dictionary", "metadata": {"rewrite": "python dictionary key lookup"}},
    {"_id": "q4", "text": "exceptions", "metadata": {"rewrite": "python exception try except"}},
]


@pytest.mark.parametrize("kind", ["bm25", "dense"])
def test_the_first_stage_searches_with_the_rewrite(kind, tiny_dataset, tiny_index, tmp_path):
    path = write_rewrites(tmp_path / "queries.jsonl", REWRITES)
    config = FirstStageConfig(kind=kind, depth=3, query=f"jsonl:{path}#rewrite")
    texts = first_stage_texts(tiny_dataset.queries, config, tiny_dataset.name)
    assert texts[0] == "python generator yield values lazily"
    q1 = first_stage(tiny_index, texts[:1], config)[0]
    original = first_stage(tiny_index, [tiny_dataset.queries[0].text], FirstStageConfig(kind=kind, depth=3))[0]
    assert tiny_dataset.doc_ids[q1[0]] == "py4" and tiny_dataset.doc_ids[original[0]].startswith("vol")


def test_a_run_starts_from_the_rewritten_pool_and_reranks_the_original_query(tiny_dataset, tiny_index, tmp_path):
    path = write_rewrites(tmp_path / "queries.jsonl", REWRITES)
    config = RunConfig.build(method="rerank", budget=4,
                             first_stage={"query": f"jsonl:{path}#rewrite", "depth": 4})
    _, _, method, budget = configure_method(tiny_dataset, tiny_index, config)
    states = query_states(tiny_dataset, tiny_index, config, method, budget, tiny_dataset.queries)
    assert all(tiny_dataset.doc_ids[s.first_stage[0]].startswith("py") for s in states)  # every pool is Python's
    assert states[0].query.text == "why do volcanoes erupt lava and ash"  # what the reranker reads


def test_a_query_without_a_rewrite_is_refused(tiny_dataset, tmp_path):
    path = write_rewrites(tmp_path / "queries.jsonl", REWRITES[:3])
    with pytest.raises(GarenError, match=r"has no text for 1 of 4 queries \(first: 'q4'\)"):
        first_stage_texts(tiny_dataset.queries, FirstStageConfig(query=f"jsonl:{path}#rewrite"), tiny_dataset.name)
    bad = write_rewrites(tmp_path / "bad.jsonl", [{"_id": "q1"}])
    with pytest.raises(GarenError, match=r"bad.jsonl, line 1, field 'rewrite': missing"):
        first_stage_texts(tiny_dataset.queries, FirstStageConfig(query=f"jsonl:{bad}#rewrite"), tiny_dataset.name)


def test_models_can_read_the_rewrite_instead(tiny_dataset, tiny_index, tmp_path):
    """models_read: rewritten gives every model after the first stage the first stage's text."""
    path = write_rewrites(tmp_path / "queries.jsonl", REWRITES)
    stage = {"query": f"jsonl:{path}#rewrite", "depth": 4, "models_read": "rewritten"}
    config = RunConfig.build(method="rerank", budget=4, first_stage=stage)
    _, _, method, budget = configure_method(tiny_dataset, tiny_index, config)
    states = query_states(tiny_dataset, tiny_index, config, method, budget, tiny_dataset.queries)
    rewrites = [r["metadata"]["rewrite"] for r in REWRITES]
    assert [s.query.text for s in states] == rewrites
    assert [s.query.id for s in states] == ["q1", "q2", "q3", "q4"]  # judged as the same queries


def test_garen_scores_past_the_depth_with_the_first_stages_text(tiny_dataset, tiny_index, tmp_path):
    """Below its depth GAREN orders documents by the first stage's score, for the text it searched with."""
    from types import SimpleNamespace

    from garen_infer.index.first_stage import all_scores
    from garen_infer.methods.garen import Garen

    path = write_rewrites(tmp_path / "queries.jsonl", REWRITES)
    config = RunConfig.build(method="rerank", budget=4, first_stage={"query": f"jsonl:{path}#rewrite", "depth": 2})
    _, _, method, budget = configure_method(tiny_dataset, tiny_index, config)
    state = query_states(tiny_dataset, tiny_index, config, method, budget, tiny_dataset.queries)[0]
    assert state.first_stage_text == "python generator yield values lazily" != state.query.text
    texts = (state.first_stage_text, state.query.text)
    rewrite, original = (all_scores(tiny_index, "bm25", t) for t in texts)
    row = tiny_dataset.doc_index["py4"]
    assert rewrite[row] > original[row]
    garen = SimpleNamespace(index=tiny_index)
    assert Garen.first_stage_score(garen, state, row) == pytest.approx(rewrite[row])
