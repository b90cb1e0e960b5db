"""A LoRA adapter (PEFT format, as garen-train exports) served through vLLM's LoRARequest gives the answers of
the transformers backend with the same adapter, and not those of the base model."""

from __future__ import annotations

import copy
import importlib.util

import pytest

from garen_infer.llm.prompts import QWEN3_ASSISTANT_PREFIX, yes_no
from garen_infer.llm.types import SamplingParams

from .engine_support import ENGINE, ENGINE_DTYPE, GEN_CHATS, PAIRS, TOLERANCE, clear_greedy_prefix

pytestmark = pytest.mark.skipif(importlib.util.find_spec("peft") is None, reason="peft is not installed in this environment (needed to write the adapter)")


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
    return folder


@pytest.fixture(scope="module")
def lora_backends(chat_model_dir, adapter):
    from garen_infer.llm.backends.transformers_backend import TransformersBackend
    from garen_infer.llm.backends.vllm_backend import VllmBackend

    served = VllmBackend(str(chat_model_dir), lora=str(adapter), **ENGINE)
    served.yes_no_logprobs = "label_ids"
    reference = TransformersBackend(str(chat_model_dir), device="cpu", dtype=ENGINE_DTYPE, lora=str(adapter))
    yield served, reference
    served.close()


def test_lora_request_matches_transformers_with_the_adapter(lora_backends, offline):
    served, reference = lora_backends
    assert f"+lora:{served.lora}|" in served.id
    params = SamplingParams(max_tokens=16)
    texts = [c.text for c in served.generate(GEN_CHATS, params)]
    compared = 0
    for chat, text, expected in zip(GEN_CHATS, texts, reference.generate(GEN_CHATS, params)):
        clear, tokens = clear_greedy_prefix(reference, chat, expected.text)
        print(f"LoRA greedy: {tokens} of {expected.output_tokens} tokens clear; vLLM {text!r}, transformers+peft {expected.text!r}")
        assert text.startswith(clear)
        compared += tokens
    assert compared >= 16
    assert texts != [c.text for c in offline.generate(GEN_CHATS, params)]  # the adapter is really applied

    chats = [yes_no(q, d) for q, d in PAIRS]
    ours = served.score_yes_no(chats, QWEN3_ASSISTANT_PREFIX)
    ref = reference.score_yes_no(chats, QWEN3_ASSISTANT_PREFIX)
    gap = max(abs(a.score - b.score) for a, b in zip(ours, ref))
    print(f"LoRA label_ids: max |dP(yes)| vLLM vs transformers+peft = {gap:.4f}")
    assert gap <= TOLERANCE
    base = copy.copy(offline)
    base.yes_no_logprobs = "label_ids"
    assert max(abs(a.score - b.score) for a, b in zip(ours, base.score_yes_no(chats, QWEN3_ASSISTANT_PREFIX))) > 0.01
