"""The limits a vLLM engine starts with, set on purpose and recorded as the engine reports them.

vLLM's own entry points choose ``max_num_seqs`` and ``max_num_batched_tokens`` from a usage context and the GPU
(``EngineArgs.get_batch_defaults``): ``vllm.LLM`` on an H100/H200 starts with 1,024 sequences and 16,384 tokens a
step, ``vllm serve`` with 1,024 and 8,192. An engine built from ``AsyncLLM.from_engine_args`` without a context
gets none of these and falls back to ``SchedulerConfig``'s 128 sequences and 2,048 tokens, which prefills an
8K-token window in four steps. The backend therefore builds its asynchronous engine with the offline context
(``LLM_CLASS``, ours is an offline workload), and the GPU presets set both limits explicitly.

Everything here is plain Python on vLLM's configuration objects (read by attribute), so it is tested without vLLM.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from garen_infer.errors import GarenError

GIB = 2**30


@dataclass(frozen=True)
class EngineLimits:
    """What one engine started with; ``kv_cache_tokens`` sums every data-parallel rank's cache."""

    max_num_seqs: int  # per data-parallel rank
    max_num_batched_tokens: int  # per step and rank
    kv_cache_tokens: int
    max_model_len: int
    tensor_parallel_size: int
    data_parallel_size: int

    @property
    def requests_at_once(self) -> int:
        """Sequences the engine runs at once over all its ranks (vLLM balances requests across them)."""
        return self.max_num_seqs * self.data_parallel_size

    @property
    def full_length_requests(self) -> int:
        """Requests of ``max_model_len`` tokens the KV cache holds at once (vLLM's "Maximum concurrency")."""
        return self.kv_cache_tokens // max(self.max_model_len, 1)

    def as_record(self) -> dict:
        return asdict(self)


def read_limits(vllm_config) -> EngineLimits:
    """The limits in a started engine's ``VllmConfig``.

    The KV cache's tokens are the ones vLLM logs ("KV cache size: N tokens"), ``cache_config.kv_cache_size_tokens``
    (vLLM 0.32 on), one rank's, times the ranks. Blocks times block size counts each block once for every cache
    group of a hybrid model (Gemma 3's sliding-window and global layers, Qwen3-Next's linear and full attention),
    several times what one request can use; it is the fallback for engines that do not report the figure. The
    client sums ``num_gpu_blocks`` over the data-parallel ranks at start, so that fallback is the whole engine's."""
    cache, scheduler, parallel = vllm_config.cache_config, vllm_config.scheduler_config, vllm_config.parallel_config
    ranks = int(parallel.data_parallel_size)
    reported = getattr(cache, "kv_cache_size_tokens", None)
    kv_tokens = int(reported) * ranks if reported else int(cache.num_gpu_blocks or 0) * int(cache.block_size)
    return EngineLimits(
        max_num_seqs=int(scheduler.max_num_seqs), max_num_batched_tokens=int(scheduler.max_num_batched_tokens),
        kv_cache_tokens=kv_tokens, max_model_len=int(vllm_config.model_config.max_model_len),
        tensor_parallel_size=int(parallel.tensor_parallel_size), data_parallel_size=ranks,
    )


def check_parallel(engine: str, data_parallel_size: int, where: str = "vllm backend") -> None:
    """``vllm.LLM`` runs one data-parallel rank per process; only the asynchronous engine balances several."""
    if data_parallel_size > 1 and engine == "offline":
        raise GarenError(f"{where}.data_parallel_size: {data_parallel_size} needs engine: async (vllm.LLM runs one "
                         "rank per process); set engine: async, or serve the model with vllm serve "
                         "--data-parallel-size")


def in_flight_warning(role: str, in_flight: int, limits: EngineLimits) -> str | None:
    """One line where a role keeps fewer requests in flight than the engine takes, or more than its KV cache holds
    at full length; None where they agree."""
    takes, holds = limits.requests_at_once, limits.full_length_requests
    if in_flight < takes:
        return (f"[run] WARNING models.{role}: at most {in_flight} requests in flight, but the engine takes {takes} "
                f"(max_num_seqs {limits.max_num_seqs} x data_parallel_size {limits.data_parallel_size}); raise "
                "run.max_active_queries or lower max_num_seqs to give its memory to the KV cache")
    if min(in_flight, takes) > holds:
        return (f"[run] WARNING models.{role}: {min(in_flight, takes)} requests in flight, but the KV cache "
                f"({limits.kv_cache_tokens} tokens) holds {holds} of max_model_len {limits.max_model_len} at once; "
                "longer ones wait in vLLM's queue: lower max_model_len to what the role sends, or raise "
                "gpu_memory_utilization")
    return None


def kv_bytes_per_token(config: dict, dtype_bytes: int = 2) -> int:
    """KV cache per token of a model's ``config.json``: full-attention layers x KV heads x head size x (K, V) x
    bytes. A hybrid model (Qwen3-Next) keeps KV in one layer of ``full_attention_interval`` only."""
    layers = int(config["num_hidden_layers"])
    if config.get("full_attention_interval"):
        layers //= int(config["full_attention_interval"])
    head = int(config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"])
    return layers * int(config.get("num_key_value_heads", config["num_attention_heads"])) * head * 2 * dtype_bytes


def check_fits(where: str, *, device_bytes: int, memory_share: float, weight_bytes: int, kv_per_token: int,
               max_model_len: int, tensor_parallel_size: int = 1) -> None:
    """Refuses limits no GPU of ``device_bytes`` can hold before the engine takes any memory: the weights alone
    above the share, or one request of ``max_model_len`` tokens above what the share leaves after the weights
    (activations and CUDA graphs come on top, so a pass here does not promise a start)."""
    share = memory_share * device_bytes
    weights = weight_bytes / tensor_parallel_size
    if weights >= share:
        raise GarenError(f"{where}.gpu_memory_utilization: {memory_share} of {device_bytes / GIB:.0f} GiB is "
                         f"{share / GIB:.1f} GiB, less than the {weights / GIB:.1f} GiB of weights per GPU; raise it "
                         "or the tensor_parallel_size")
    needed = max_model_len * kv_per_token / tensor_parallel_size
    if needed > share - weights:
        fits = int((share - weights) * tensor_parallel_size // max(kv_per_token, 1))
        raise GarenError(f"{where}.max_model_len: one request of {max_model_len} tokens needs {needed / GIB:.1f} GiB "
                         f"of KV cache per GPU, more than the {(share - weights) / GIB:.1f} GiB that "
                         f"gpu_memory_utilization {memory_share} leaves after the weights; set max_model_len to "
                         f"{fits} or less, or raise gpu_memory_utilization")


def check_model_fits(where: str, model: str, memory_share: float | None, max_model_len: int | None,
                     tensor_parallel_size: int = 1) -> None:
    """``check_fits`` for a local model folder on this machine's first GPU; nothing to check without a GPU, a
    folder with ``config.json`` and safetensors, or a ``max_model_len``."""
    import json
    from pathlib import Path

    folder = Path(model)
    weights = sum(f.stat().st_size for f in folder.glob("*.safetensors")) if folder.is_dir() else 0
    if not weights or max_model_len is None or not (folder / "config.json").is_file():
        return
    try:
        import torch

        if not torch.cuda.is_available():
            return
        device_bytes = torch.cuda.mem_get_info()[1]
    except ImportError:
        return
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config = config.get("text_config", config)
    check_fits(where, device_bytes=device_bytes, memory_share=memory_share or 0.9, weight_bytes=weights,
               kv_per_token=kv_bytes_per_token(config), max_model_len=max_model_len,
               tensor_parallel_size=tensor_parallel_size)


def linear_state_bytes(config: dict, dtype_bytes: int = 2) -> int:
    """The fixed state one running sequence keeps in a hybrid model's linear-attention layers (vLLM's Mamba cache
    block): per layer, the convolution's last ``kernel - 1`` inputs and the recurrent state; 0 for a plain model."""
    interval = int(config.get("full_attention_interval") or 0)
    if not interval:
        return 0
    layers = int(config["num_hidden_layers"]) - int(config["num_hidden_layers"]) // interval
    keys = int(config["linear_num_key_heads"]) * int(config["linear_key_head_dim"])
    values = int(config["linear_num_value_heads"]) * int(config["linear_value_head_dim"])
    convolution = (2 * keys + values) * (int(config["linear_conv_kernel_dim"]) - 1)
    recurrent = (
        int(config["linear_num_value_heads"])
        * int(config["linear_key_head_dim"])
        * int(config["linear_value_head_dim"])
    )
    return layers * (convolution + recurrent) * dtype_bytes


def vllm_engines(preset: dict) -> dict[str, dict]:
    """{place in the preset: spec} for every vLLM engine a preset starts: its roles' and its index stages'."""
    engines = {
        f"models.{role}": spec
        for role, spec in preset.get("models", {}).items()
        if spec.get("backend") == "vllm"
    }
    for stage, options in preset.get("index", {}).items():
        summarizer = options.get("summarizer") if isinstance(options, dict) else None
        if isinstance(summarizer, dict) and summarizer.get("backend") == "vllm":
            engines[f"index.{stage}.summarizer"] = summarizer
    return engines
