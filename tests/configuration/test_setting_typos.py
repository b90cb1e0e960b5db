"""A misspelled key anywhere in a preset or a ``--set`` is refused in one line with the nearest known key, before
any data or model loads: top-level sections, method options, index stages, and model specs (``models.<role>``
and a stage's ``summarizer``) against the fields of their backend's config class (``backends.BACKENDS``)."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from garen_infer.configuration.presets import load_preset
from garen_infer.doors.cli import main
from garen_infer.errors import GarenError
from garen_infer.llm.backends import BACKENDS, backend_class
from garen_infer.llm.model_specs import check_model_spec, spec_identity
from garen_infer.llm.roles import build_roles


def refused(overrides: list[str]) -> str:
    with pytest.raises(GarenError) as error:
        load_preset("cpu-default", overrides)
    return str(error.value)


@pytest.mark.parametrize("override, message", [
    ("mehtods.rerank.budget=7", "invalid setting mehtods: no such section of a preset (did you mean 'methods'?); "
                                "known: index, first_stage, models, run, methods"),
    ("methods.rerank.budgt=7", "invalid setting methods.rerank.budgt: no such option (did you mean 'budget'?); "
                               "methods.rerank has budget, window, stride"),
    ("methods.garn.budget=7", "invalid setting methods.garn: no such method (did you mean 'garen'?); known: bm25,"),
    ("models.navigator.backnd=openai",
     "invalid setting models.navigator.backnd: no such option (did you mean 'backend'?); "
     "models.navigator has backend, mode, model, price"),
    ("models.navigator.backend=vlm",
     "invalid setting models.navigator.backend='vlm': no such backend (did you mean 'vllm'?); "
     "known: transformers, vllm, openai, cross-encoder, embedding, oracle"),
    ("models.reranker={backend: openai, model: m, timout: 30}",
     "invalid setting models.reranker.timout: no such option "
     "(did you mean 'timeout'?); models.reranker "
     "has backend, model, base_url,"),
    ("models.reranker={backend: vllm, model: m, tensor_paralel_size: 2}",
     "invalid setting models.reranker.tensor_paralel_size: no such option "
     "(did you mean 'tensor_parallel_size'?)"),
    ("models.reranker={backend: transformers, model: m, dtyp: float32}", "(did you mean 'dtype'?)"),
    ("models.reranker={backend: cross-encoder, model: m, max_lenght: 64}", "(did you mean 'max_length'?)"),
    ("models.reranker={backend: oracle, sigmaa: 1}",
     "invalid setting models.reranker.sigmaa: no such option (did you mean 'sigma'?)"),
    ("models.reranker={backend: openai, model: m, timeout: soon}",
     "invalid setting models.reranker.timeout='soon': expected a number"),
    ("models.reranker={backend: vllm}", "invalid setting models.reranker: backend 'vllm' needs models.reranker.model"),
    ("models.reranker={backend: vllm, model: m, sampling: {temprature: 0}}",
     "invalid setting models.reranker.sampling.temprature: "
      "no such option (did you mean "
      "'temperature'?)"),
    ("index.groups.summarizer={backend: vllm, modle: m}",
     "invalid setting index.groups.summarizer.modle: no such option "
     "(did you mean 'model'?)"),
    ("index.groups.summarizer={backend: extractiv}",
     "invalid setting index.groups.summarizer.backend='extractiv': no such backend "
     "(did you mean 'extractive'?)"),
    ("index.semantic_tree.summarizer={backend: openai, model: m, concurency: 4}", "(did you mean 'concurrency'?)"),
    ("index.embedings.model=x", "unknown index stage 'embedings' (did you mean 'embeddings'?)"),
])
def test_a_typo_is_refused_with_the_nearest_key(override, message):
    assert message in refused([override])


@pytest.mark.parametrize("override, message", [
    ("models.reranker=embedding",
     "invalid setting models.reranker='embedding': expected a mapping such as {backend: embedding}"),
    ("index.groups.summarizer=extractive", "invalid setting index.groups.summarizer='extractive': expected a mapping"),
])
def test_a_spec_given_as_a_bare_name_is_refused_in_one_line(override, message):
    assert refused([override]).startswith(message)


def test_a_summarizer_given_as_a_bare_name_is_shown_the_mapping_it_needs():
    with pytest.raises(GarenError,
                       match=r"^invalid setting s='vllm': expected a mapping such as \{backend: extractive\}$"):
        check_model_spec("vllm", "s", summarizer=True)


def test_a_typo_in_a_preset_file_is_refused_by_the_command_in_one_line(beir_dir, tmp_path, capsys):
    preset = load_preset("cpu-default")
    preset["mehtods"] = preset.pop("methods")
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(preset))
    assert main(["index", "--dataset", str(beir_dir), "--preset", str(path), "--out", str(tmp_path / "index")]) == 2
    err = capsys.readouterr().err
    assert err == ("garen-infer index: error: invalid setting mehtods: no such section of a preset (did you mean "
                   "'methods'?); known: index, first_stage, models, run, methods\n")
    assert not (tmp_path / "index" / "manifest.json").exists()


@pytest.mark.parametrize("kind", sorted(BACKENDS))
def test_every_field_a_backend_declares_is_accepted(kind):
    """A backend's settings are its config class's fields: a field added there is accepted with no other change."""
    cls = backend_class(kind)
    for f in dataclasses.fields(cls):
        if f.init and f.name != "model":
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            check_model_spec({"backend": kind, "model": "m", f.name: default}, "models.reranker")
            check_model_spec({"backend": kind, "model": "m", f.name: default}, "index.groups.summarizer",
                             summarizer=True)


def test_a_typo_is_refused_where_roles_are_built_too(tiny_dataset):
    """Roles built without a preset (the Python API) are checked the same way."""
    with pytest.raises(GarenError, match="models.navigator.backnd: no such option \\(did you mean 'backend'\\?\\)"):
        build_roles({"navigator": {"backnd": "openai"}}, [], None, None, dataset=tiny_dataset)


def test_a_model_specs_identity_leaves_out_how_it_runs():
    """The summarizer's device, batch size, memory share or timeouts never change its answers (nor its cache key)."""
    spec = {"backend": "vllm", "model": "m", "sampling": {"temperature": 0.0}}
    assert spec_identity({**spec, "tensor_parallel_size": 2, "gpu_memory_utilization": 0.5,
                          "enforce_eager": True}) == spec
    assert spec_identity({**spec, "dtype": "float32"}) != spec
    openai = {"backend": "openai", "model": "m"}
    assert spec_identity({**openai, "concurrency": 4, "timeout": 10.0, "max_retries": 1}) == openai
    transformers = {"backend": "transformers", "model": "m"}
    assert spec_identity({**transformers, "batch_size": 1, "device": "cpu"}) == transformers
