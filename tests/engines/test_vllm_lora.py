"""A LoRA adapter (PEFT format, as garen-train exports) served through vLLM's LoRARequest gives the answers of
the transformers backend with the same adapter, and not those of the base model.

Each model answers in turn and is closed before the next one loads (the base engine, the transformers
reference, the engine with the adapter), so the module holds one model at a time."""

from __future__ import annotations

import importlib.util

import pytest

from garen_infer.llm.prompts import QWEN3_ASSISTANT_PREFIX, yes_no
from garen_infer.llm.types import SamplingParams

from .engine_support import (
    ENGINE_DTYPE,
    GEN_CHATS,
    PAIRS,
    TOLERANCE,
    clear_greedy_prefix,
    give_memory_back,
    vllm_engine,
)

pytestmark = pytest.mark.skipif(importlib.util.find_spec("peft") is None,
                                reason="peft is not installed in this environment (needed to write the adapter)")

GENERATION = SamplingParams(max_tokens=16)
YES_NO_CHATS = [yes_no(q, d) for q, d in PAIRS]


@pytest.fixture(scope="module")
def adapter(chat_model_dir, tmp_path_factory):
    """A rank-8 adapter on q_proj/v_proj with random A and B (PEFT zero-initialises B, which would change nothing).
    Scale 0.03 changes every answer yet keeps the model out of whitespace runs of near-tied tokens."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    folder = tmp_path_factory.mktemp("lora") / "adapter"
    base = AutoModelForCausalLM.from_pretrained(str(chat_model_dir), dtype=torch.float32)
    model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=["q_proj", "v_proj"]))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.03)
    model.save_pretrained(str(folder))
    del base, model
    give_memory_back()
    return folder


def reference_answers(chat_model_dir, adapter) -> tuple[list[tuple[str, int]], list[float]]:
    """The transformers backend with the adapter: per chat, the clear prefix of its greedy answer and that
    prefix's length in tokens (clear_greedy_prefix); P(yes) per pair."""
    from garen_infer.llm.backends.transformers_backend import TransformersBackend

    reference = TransformersBackend(str(chat_model_dir), device="cpu", dtype=ENGINE_DTYPE, lora=str(adapter))
    texts = []
    for chat, answer in zip(GEN_CHATS, reference.generate(GEN_CHATS, GENERATION)):
        clear, tokens = clear_greedy_prefix(reference, chat, answer.text)
        print(f"LoRA greedy: {tokens} of {answer.output_tokens} clear; transformers+peft {answer.text!r}")
        texts.append((clear, tokens))
    scores = [c.score for c in reference.score_yes_no(YES_NO_CHATS, QWEN3_ASSISTANT_PREFIX)]
    del reference
    give_memory_back()
    return texts, scores


def test_lora_request_matches_transformers_with_the_adapter(chat_model_dir, adapter):
    with vllm_engine(chat_model_dir, yes_no_logprobs="label_ids") as base:
        base_texts = [c.text for c in base.generate(GEN_CHATS, GENERATION)]
        base_scores = [c.score for c in base.score_yes_no(YES_NO_CHATS, QWEN3_ASSISTANT_PREFIX)]
    expected_texts, expected_scores = reference_answers(chat_model_dir, adapter)
    with vllm_engine(chat_model_dir, lora=str(adapter), yes_no_logprobs="label_ids") as served:
        assert f"+lora:{served.lora}|" in served.id
        texts = [c.text for c in served.generate(GEN_CHATS, GENERATION)]
        scores = [c.score for c in served.score_yes_no(YES_NO_CHATS, QWEN3_ASSISTANT_PREFIX)]

    for text, (clear, _) in zip(texts, expected_texts):
        print(f"LoRA greedy: vLLM {text!r}")
        assert text.startswith(clear)
    assert sum(tokens for _, tokens in expected_texts) >= 16
    assert texts != base_texts  # the adapter is really applied

    gap = max(abs(a - b) for a, b in zip(scores, expected_scores))
    print(f"LoRA label_ids: max |dP(yes)| vLLM vs transformers+peft = {gap:.4f}")
    assert gap <= TOLERANCE
    assert max(abs(a - b) for a, b in zip(scores, base_scores)) > 0.01
