"""The run configuration: one typed object built once from a preset (the method's own config with the
budget in it, the first stage, the models), what a method needs read from it without building the method,
its options documented by ``garen-infer options``, and run folders saved before it resuming under it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from conftest import REPO

from garen_infer.configuration.presets import load_preset, run_config_from
from garen_infer.configuration.run_config import RunConfig
from garen_infer.doors.cli import main
from garen_infer.errors import GarenError
from garen_infer.index.first_stage import FirstStageConfig
from garen_infer.llm.roles import Roles
from garen_infer.methods.base import METHODS, Method
from garen_infer.methods.garen import GarenConfig
from garen_infer.running.session import execute
from garen_infer.testing.methods import ScriptedReranker


def test_a_preset_becomes_one_typed_configuration():
    preset = load_preset("cpu-default", ["methods.garen.window=12", "first_stage.depth=50"])
    config = run_config_from(preset, "garen", 30)
    assert isinstance(config.options, GarenConfig) and config.options.window == 12
    assert config.options.budget == config.budget == 30  # --budget over the preset's, written in once
    assert config.first_stage == FirstStageConfig(depth=50) and config.first_stage.index_stage == "bm25"
    assert config.settled_options().rbp_p == 0.6  # App. A: the non-reasoning prompt's p, from the models
    assert run_config_from(load_preset("cpu-default"), "bm25", 30).budget is None  # bm25 takes no budget


def test_every_shipped_preset_configures_every_method():
    from garen_infer.configuration.presets import CONFIG_DIR

    for path in sorted(CONFIG_DIR.glob("*.yaml")):
        preset = load_preset(path.stem)
        for name in METHODS:
            config = run_config_from(preset, name)
            assert config.index_stages and config.roles == config.method_class.roles_for(config.settled_options())


@pytest.mark.parametrize("parts, message", [
    (dict(method="garen", method_options={"windw": 3}), "methods.garen.windw: no such option (did you mean"),
    (dict(method="garen", budget=0), "invalid setting methods.garen.budget=0: expected an integer >= 1"),
    (dict(method="rerank", first_stage={"kind": "sparse"}), "invalid setting first_stage.kind='sparse'"),
    (dict(method="rerank", models={"reranker": {"backend": "nope"}}), "models.reranker.backend='nope'"),
    (dict(method="rerank", max_batch=0), "invalid setting run.max_batch=0"),
    (dict(method="rerank", max_bach=3), "run.max_bach: no such option (did you mean 'max_batch'?)"),
    (dict(method="nope"), "unknown method 'nope'"),
])
def test_each_part_is_checked_as_it_is_built(parts, message):
    with pytest.raises(GarenError) as err:
        RunConfig.build(**parts)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_stages_and_roles_are_read_without_building_the_method(monkeypatch):
    monkeypatch.setattr(Method, "__init__", lambda *_: pytest.fail("a method was built"))
    preset = load_preset("cpu-default")
    garen = run_config_from(preset, "garen")
    assert garen.index_stages == ("bm25", "knn_graph", "groups") and garen.roles == ("reranker", "navigator")
    changes = ["methods.garen.navigator=connectivity", "methods.garen.groups=groups_kmeans",
               "first_stage.kind=dense"]
    other = run_config_from(load_preset("cpu-default", changes), "garen")
    assert other.index_stages == ("embeddings", "bm25", "knn_graph", "groups_kmeans")
    assert other.roles == ("reranker",)
    changes = ["methods.lattice++.tree=tree_b", "methods.lattice++.slate_scorer=navigator"]
    lattice = run_config_from(load_preset("cpu-default", changes), "lattice++")
    assert lattice.index_stages == ("bm25", "tree_b", "embeddings") and lattice.roles == ("navigator",)
    for name in METHODS:  # every method answers without being built
        config = run_config_from(preset, name)
        assert config.index_stages[0] == "bm25" and isinstance(config.roles, tuple)


def test_bench_plans_its_cells_without_building_a_method(beir_dir, tiny_index, tmp_path, monkeypatch):
    from garen_infer.llm.cache import NoCache
    from garen_infer.report.bench import run_bench
    from garen_infer.report.bench_config import load_bench_config

    monkeypatch.setattr(Method, "__init__", lambda *_: pytest.fail("a method was built to plan a cell"))
    bench = {"preset": "cpu-default", "budgets": [4], "methods": ["rerank", "garen", "lattice"],
             "datasets": {"tiny": {"spec": f"beir:{beir_dir}", "index": str(tiny_index.path)}},
             "runs": str(tmp_path / "runs"), "report": str(tmp_path / "report")}
    (tmp_path / "bench.yaml").write_text(yaml.safe_dump(bench))
    cannot_run = r"2 cell\(s\) cannot run .*garen@4: .*'groups'.*lattice.*'semantic_tree'"
    with pytest.raises(GarenError, match=cannot_run):
        run_bench(load_bench_config(tmp_path / "bench.yaml"), NoCache(), log=lambda *_: None)
    assert not (tmp_path / "runs").exists()


def test_config_does_not_import_the_runner():
    code = "import sys, garen_infer.configuration.presets; print('garen_infer.running.runner' in sys.modules)"
    imported = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                              check=True)
    assert imported.stdout.strip() == "False"


def test_a_run_folder_saved_before_the_typed_configuration_resumes(tiny_dataset, tiny_index, tmp_path):
    """config.json as runs wrote it when the configuration was dicts: the same keys, values and order."""
    config = RunConfig.build("rerank", {"budget": 8, "window": 4, "stride": 2}, max_active_queries=1)
    whole = tmp_path / "whole"
    reranker = ScriptedReranker({row: -row for row in range(len(tiny_dataset.documents))})  # first row first
    execute(tiny_dataset, tiny_index, config, whole, roles=Roles(reranker=reranker), log=lambda *_: None)
    saved = {
        "dataset": tiny_dataset.name, "corpus_fingerprint": tiny_dataset.fingerprint(),
        "index": str(tiny_index.path),
        "index_stages": {"bm25": tiny_index.manifest["stages"]["bm25"]["params"]},
        "method": "rerank", "method_options": {"budget": 8, "window": 4, "stride": 2}, "budget": 8,
        "first_stage": {"kind": "bm25", "depth": 1000, "query": "original"}, "models": {}, "limit": None,
    }
    old = tmp_path / "old"
    old.mkdir()
    (old / "config.json").write_text(json.dumps(saved, indent=2, sort_keys=True) + "\n")
    first = (whole / "trace.jsonl").read_text(encoding="utf-8").splitlines()[0]
    (old / "trace.jsonl").write_text(first + "\n", encoding="utf-8")
    execute(tiny_dataset, tiny_index, config, old, roles=Roles(reranker=reranker), log=lambda *_: None)
    assert (old / "run.trec").read_bytes() == (whole / "run.trec").read_bytes()
    assert (old / "config.json").read_bytes() == (whole / "config.json").read_bytes()


def test_options_prints_each_fields_type_default_source_and_meaning(capsys):
    assert main(["options", "garen"]) == 0
    out = capsys.readouterr().out
    assert "tau_switch = 4    an integer >= 0    [sec. 5, App. D]\n      iteration that ends exploration" \
        in out
    assert "keep = 10    an integer >= 0 and < window" in out
    assert main(["options", "run", "--json"]) == 0
    fields = {f["name"]: f for f in json.loads(capsys.readouterr().out)}
    assert set(fields) == {"max_active_queries", "max_batch", "limit", "shard", "unusable_answers_warning"}
    assert fields["max_batch"] == {"name": "max_batch", "allowed": "an integer >= 1", "default": 64,
                                   "source": "", "meaning": "items per backend call"}
    for name in [*METHODS, "first_stage"]:  # every option of every method says what it means
        assert main(["options", name, "--json"]) == 0
        assert all(f["meaning"] for f in json.loads(capsys.readouterr().out)), name
    assert main(["options", "garn"]) == 2
    assert "no options for 'garn'" in capsys.readouterr().err


def test_a_missing_generator_is_blamed_on_the_rewrite_only_when_the_run_rewrites():
    with pytest.raises(GarenError, match=r"needs model\(s\) for generator; add them") as repair:
        RunConfig.build("repair").require_models()
    assert "rewrite" not in str(repair.value)
    with pytest.raises(GarenError, match=r"for generator \(first_stage.query: rewrite asks it"):
        RunConfig.build("rerank", first_stage={"query": "rewrite"}, models={"reranker": {}}).require_models()
