"""What one GPU machine's minutes should tell us, measured on the presets' models at their real shapes with random
weights (their config.json files are in scripts/model_configs; no hub, no vLLM). Run by scripts/gpu_check.sh.

    yes_no_drift        P(yes) in bf16 against fp32 at Qwen3-Reranker-4B's depth (36 layers): max |dP(yes)|
    yes_no_scorer       the transformers yes/no scorer (garen_infer's own last-position [no, yes] logits) on
                        ~1,100-token prompts in batches of 64 to 256: peak memory and pairs per second
    lora_step           one LoRA navigator training step (rank 16 on every linear layer, 16 prompts x 1,024 tokens,
                        gradient checkpointing, AdamW) against the ~15 GB the training preset states
    embedding_release   Qwen3-Embedding-4B encoding 8 x 4,096 tokens (last-token pooling), then its release: at
                        least 90 % of the GPU free afterwards, for the summarizer's engine
    memory_shares       each GPU preset's vLLM engines on this GPU (torch.cuda.mem_get_info): the share, the weights
                        and linear-attention state per GPU, and the KV cache tokens left (arithmetic)

It prints one JSON document: {"device", "dry_run", "checks": {name: {"status": "pass"|"fail"|"skipped", ...}},
"seconds"}; the exit status is 1 when a check failed, 0 otherwise (a skipped check names its reason: a package
this machine lacks). ``--cpu-dry-run`` runs every check on the CPU with the same models shrunk to a few layers
and short prompts, and sizes the presets for an 80 GB and a 141 GB GPU: the code paths but CUDA's, in seconds.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CONFIGS = REPO / "scripts" / "model_configs"
RERANKER, EMBEDDER = "Qwen/Qwen3-Reranker-4B", "Qwen/Qwen3-Embedding-4B"
YES, NO = 9693, 2152  # Qwen3's "yes" and "no"; with random weights any two ids would do
MAX_DP_BF16 = 0.05
TRAINING_ESTIMATE_GB = 15.0  # configs/train/gpu-qwen3-navigator.yaml
FREE_FOR_THE_SUMMARIZER = 0.90  # the groups stage's engine claims 0.9 of the GPU (garen-paper.yaml)
DRY_RUN_GPUS_GIB = (80, 141)  # H100 and H200
# published checkpoint sizes (docs/gpu-presets.md); the FP8 checkpoints hold their experts in one byte per weight
WEIGHTS_GIB = {"Qwen/Qwen3-Next-80B-A3B-Instruct-FP8": 76.4, "Qwen/Qwen3-Next-80B-A3B-Instruct": 149.0,
               "Qwen/Qwen3-Reranker-4B": 7.5, "Qwen/Qwen3-30B-A3B-Instruct-2507-FP8": 28.9,
               "Qwen/Qwen3-30B-A3B-Instruct-2507": 56.9}
ACTIVATIONS_GIB = 2.0  # an estimate of what vLLM's start-up profile keeps for activations and CUDA graphs
GPU_PRESETS = ("garen-paper", "rgs-paper", "rarg-paper")


class Sizes:
    """The real workload, or the dry run's: the same steps on a few layers and short prompts."""

    def __init__(self, dry_run: bool):
        self.dry_run = dry_run
        self.prompt_tokens, self.batches = (48, (4, 8)) if dry_run else (1100, (64, 128, 256))
        self.drift_prompts = 4 if dry_run else 16
        self.lora = (2, 32) if dry_run else (16, 1024)  # prompts x tokens per step
        self.encode = (2, 64) if dry_run else (8, 4096)

    def config(self, model: str) -> dict:
        config = json.loads(
            (CONFIGS / f"{model.removesuffix('-FP8').replace('/', '__')}.json").read_text(encoding="utf-8")
        )
        if self.dry_run:  # the architecture's shape, a few small layers
            config.update(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,
                          num_key_value_heads=2, head_dim=16, vocab_size=10_000, max_window_layers=2,
                          bos_token_id=0, eos_token_id=1)
        return config


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="gpu_check", description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-dry-run", action="store_true", help="every check on the CPU, on shrunk models")
    parser.add_argument("--only", nargs="+", choices=sorted(CHECKS), help="these checks only")
    args = parser.parse_args(argv)
    sizes, start = Sizes(args.cpu_dry_run), time.perf_counter()
    device = "cpu" if args.cpu_dry_run else "cuda"
    results = {name: run_check(CHECKS[name], device, sizes) for name in args.only or CHECKS}
    print(json.dumps({"device": describe(device), "dry_run": args.cpu_dry_run, "checks": results,
                      "seconds": round(time.perf_counter() - start, 1)}, indent=2))
    return 1 if any(r["status"] == "fail" for r in results.values()) else 0


def run_check(check, device: str, sizes: Sizes) -> dict:
    """One check's figures and status: skipped with its reason where a package or the GPU is missing, failed with
    the error's one line where it broke; never a traceback."""
    begun = time.perf_counter()
    try:
        if device == "cuda" and not cuda_available():
            result = {"status": "fail", "reason": "no CUDA device (--cpu-dry-run runs the checks on the CPU)"}
        else:
            result = {"status": "pass", **check(device, sizes)}
    except ImportError as err:
        result = {"status": "skipped", "reason": f"missing package: {err.name or err}"}
    except CheckFailed as failure:
        result = {"status": "fail", "reason": str(failure), **failure.figures}
    except Exception as err:  # one check's crash is its failure; the others still run
        result = {"status": "fail",
                  "reason": f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"}
    finally:
        release(device)
    result["seconds"] = round(time.perf_counter() - begun, 2)
    return result


class CheckFailed(Exception):
    def __init__(self, reason: str, **figures):
        super().__init__(reason)
        self.figures = figures


# ---- the checks --------------------------------------------------------------------------------------------
def yes_no_drift(device: str, sizes: Sizes) -> dict:
    import torch

    from garen_infer.llm.backends.yes_no_scoring import yes_no_logits, yes_probabilities

    net = random_model(sizes.config(RERANKER), device, torch.float32)
    ids, mask = random_prompts(sizes.drift_prompts, sizes.prompt_tokens, net.config.vocab_size, device)
    with torch.no_grad():
        p32 = yes_probabilities(yes_no_logits(net, ids, mask, YES % net.config.vocab_size, NO % net.config.vocab_size))
        net.to(torch.bfloat16)
        p16 = yes_probabilities(yes_no_logits(net, ids, mask, YES % net.config.vocab_size, NO % net.config.vocab_size))
    drift = float((p32 - p16).abs().max())
    figures = {"layers": net.config.num_hidden_layers, "prompts": len(ids), "prompt_tokens": sizes.prompt_tokens,
               "max_dp_yes": round(drift, 5)}
    if not torch.isfinite(p16).all() or drift > MAX_DP_BF16:
        raise CheckFailed(f"bf16 P(yes) off fp32 by more than {MAX_DP_BF16}", **figures)
    return figures


def yes_no_scorer(device: str, sizes: Sizes) -> dict:
    import torch

    from garen_infer.llm.backends.yes_no_scoring import yes_no_logits

    net = random_model(sizes.config(RERANKER), device, torch.bfloat16)
    rows = []
    for batch in sizes.batches:
        ids, mask = random_prompts(batch, sizes.prompt_tokens, net.config.vocab_size, device)
        reset_peak(device)
        with torch.no_grad():
            yes_no_logits(net, ids, mask, 1, 2)  # warm-up at this shape
            synchronize(device)
            begun = time.perf_counter()
            yes_no_logits(net, ids, mask, 1, 2)
            synchronize(device)
        rows.append({"batch": batch, "pairs_per_s": round(batch / (time.perf_counter() - begun), 1),
                     "peak_gib": peak_gib(device)})
    return {"prompt_tokens": sizes.prompt_tokens, "dtype": "bfloat16", "batches": rows}


def lora_step(device: str, sizes: Sizes) -> dict:
    import torch
    from peft import LoraConfig, get_peft_model

    net = random_model(sizes.config(RERANKER), device, torch.bfloat16)
    (getattr(net, "activation_checkpointing_enable", None) or net.gradient_checkpointing_enable)()
    net.enable_input_require_grads()
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    net = get_peft_model(net, LoraConfig(r=16, lora_alpha=32, target_modules=targets))
    for parameter in net.parameters():  # the adapters train in fp32 beside the bf16 base, as the job does
        if parameter.requires_grad:
            parameter.data = parameter.data.float()
    optimizer = torch.optim.AdamW([p for p in net.parameters() if p.requires_grad], lr=1e-4)
    prompts, tokens = sizes.lora
    ids, mask = random_prompts(prompts, tokens, net.config.vocab_size, device)
    reset_peak(device)
    with torch.autocast(device_type=device, dtype=torch.bfloat16):
        logits = net(input_ids=ids, attention_mask=mask, logits_to_keep=1).logits[:, -1, :2].float()
    loss = torch.nn.functional.cross_entropy(logits, torch.zeros(prompts, dtype=torch.long, device=device))
    loss.backward()
    optimizer.step()
    trainable = sum(p.numel() for p in net.parameters() if p.requires_grad)
    figures = {"prompts": prompts, "tokens": tokens, "trainable_params": trainable, "peak_gib": peak_gib(device),
               "stated_gb": TRAINING_ESTIMATE_GB, "loss_finite": bool(torch.isfinite(loss))}
    if not figures["loss_finite"]:
        raise CheckFailed("the step's loss is not finite", **figures)
    return figures


def embedding_release(device: str, sizes: Sizes) -> dict:
    import torch

    net = random_model(sizes.config(EMBEDDER), device, torch.bfloat16).model  # the encoder, without its LM head
    batch, tokens = sizes.encode
    ids, mask = random_prompts(batch, tokens, net.config.vocab_size, device)
    reset_peak(device)
    with torch.no_grad():
        vectors = net(input_ids=ids, attention_mask=mask).last_hidden_state[:, -1]  # last-token pooling
        vectors = torch.nn.functional.normalize(vectors.float(), dim=-1)
    figures = {"batch": batch, "tokens": tokens, "dim": int(vectors.shape[-1]), "peak_gib": peak_gib(device)}
    del net, vectors, ids, mask
    release(device)
    if device == "cuda":
        free, total = torch.cuda.mem_get_info()
        figures.update(free_share=round(free / total, 3), held_mib=round(torch.cuda.memory_allocated() / 2**20, 1))
        if free / total < FREE_FOR_THE_SUMMARIZER:
            raise CheckFailed("the GPU's memory was not handed back", **figures)
    return figures


def memory_shares(device: str, sizes: Sizes) -> dict:
    totals = DRY_RUN_GPUS_GIB if device == "cpu" else (gpu_total_gib(),)
    return {"activations_gib_estimate": ACTIVATIONS_GIB,
            "engines": [row for total in totals for row in preset_shares(total, sizes)]}


CHECKS = {"yes_no_drift": yes_no_drift, "yes_no_scorer": yes_no_scorer, "lora_step": lora_step,
          "embedding_release": embedding_release, "memory_shares": memory_shares}


# ---- sizing ------------------------------------------------------------------------------------------------
def preset_shares(total_gib: float, sizes: Sizes) -> list[dict]:
    """Each vLLM engine of the GPU presets on a GPU of ``total_gib``: what its share holds per GPU."""
    from garen_infer.configuration.presets import load_preset
    from garen_infer.llm.backends.vllm_limits import GIB, kv_bytes_per_token, linear_state_bytes, vllm_engines

    rows = []
    for preset in GPU_PRESETS:
        for where, spec in vllm_engines(load_preset(preset)).items():
            config = Sizes(False).config(spec["model"])  # the real shape, dry run or not: this is arithmetic
            tp, seqs = spec.get("tensor_parallel_size", 1), spec["max_num_seqs"]
            share = spec.get("gpu_memory_utilization", 0.9) * total_gib
            weights, state = WEIGHTS_GIB[spec["model"]] / tp, seqs * linear_state_bytes(config) / tp / GIB
            kv_gib = share - weights - state - ACTIVATIONS_GIB
            kv_tokens = int(
                max(kv_gib, 0) * GIB / (kv_bytes_per_token(config) / min(tp, config["num_key_value_heads"]))
            )
            rows.append({"gpu_gib": round(total_gib), "preset": preset, "engine": where, "tp": tp,
                         "share_gib": round(share, 1), "weights_gib": round(weights, 1), "state_gib": round(state, 1),
                         "kv_gib": round(kv_gib, 1), "kv_tokens": kv_tokens, "max_model_len": spec["max_model_len"],
                         "full_length_requests": kv_tokens // spec["max_model_len"], "max_num_seqs": seqs,
                         "max_num_batched_tokens": spec.get("max_num_batched_tokens")})
    return rows


# ---- helpers -----------------------------------------------------------------------------------------------
def random_model(config: dict, device: str, dtype):
    """A causal LM of ``config``'s architecture with random weights, built on the device."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    fields = {k: v for k, v in config.items() if k not in ("architectures", "torch_dtype", "model_type")}
    torch.manual_seed(0)
    with torch.device(device):
        net = AutoModelForCausalLM.from_config(AutoConfig.for_model(config["model_type"], **fields), dtype=dtype)
    return net.eval()


def random_prompts(batch: int, tokens: int, vocab: int, device: str):
    import torch

    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (batch, tokens), generator=generator).to(device)
    return ids, torch.ones_like(ids)


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def describe(device: str) -> str:
    if device == "cpu" or not cuda_available():
        return device
    import torch

    return f"{torch.cuda.get_device_name()} ({gpu_total_gib():.0f} GiB)"


def gpu_total_gib() -> float:
    import torch

    return torch.cuda.mem_get_info()[1] / 2**30


def reset_peak(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.reset_peak_memory_stats()


def peak_gib(device: str) -> float | None:
    """The device's peak allocation since the last reset; None on the CPU, where torch keeps no such count."""
    if device != "cuda":
        return None
    import torch

    return round(torch.cuda.max_memory_allocated() / 2**30, 2)


def synchronize(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def release(device: str) -> None:
    gc.collect()
    if device == "cuda":
        import torch

        torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main())
