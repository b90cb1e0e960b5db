"""GPU presets are sized to start and to keep their engines busy: every query of a task in flight, each vLLM
engine's max_num_seqs to match, and those settings execution-only, so a run resumes after they change."""

from __future__ import annotations

import pytest

from garen_infer.configuration.presets import load_preset
from garen_infer.errors import GarenError
from garen_infer.llm.roles import EmbeddingReranker, Roles
from garen_infer.running.runner import RunConfig, execute

RUN_PRESETS = ("garen-paper", "rgs-paper", "lattice-paper", "rarg-paper")
ALL_OF_A_BRIGHT_TASK = 194  # theoremqa_questions, the largest of BRIGHT's twelve tasks


def vllm_engines(preset: dict) -> dict[str, dict]:
    engines = {f"models.{role}": spec for role, spec in preset["models"].items() if spec.get("backend") == "vllm"}
    for stage, options in preset.get("index", {}).items():
        summarizer = options.get("summarizer") if isinstance(options, dict) else None
        if isinstance(summarizer, dict) and summarizer.get("backend") == "vllm":
            engines[f"index.{stage}.summarizer"] = summarizer
    return engines


@pytest.mark.parametrize("name", RUN_PRESETS)
def test_gpu_presets_keep_every_query_of_a_task_in_flight_and_their_engines_sized_to_match(name):
    """Was: 16 queries in flight, and vLLM's default max_num_seqs (1,024), which Qwen3-Next's Mamba cache cannot hold."""
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
