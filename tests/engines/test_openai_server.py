"""The OpenAI-compatible backend against a real `vllm serve` on 127.0.0.1: the offline engine's answers.

The offline engine answers first and is closed before the server starts: one engine at a time."""

from __future__ import annotations

import pytest

from garen_infer.errors import GarenError
from garen_infer.llm.backends.openai_backend import OpenAIBackend
from garen_infer.llm.types import SamplingParams

from .engine_support import GEN_CHATS, JSON_PREFIX, PAIRS, SERVED_NAME, TOLERANCE, plain_yes_no, vllm_engine

SECRET = "sk-engine-test-DO-NOT-LOG-1234567890"
GENERATION = SamplingParams(max_tokens=32)
YES_NO_CHATS = [plain_yes_no(q, d) for q, d in PAIRS]


@pytest.fixture(scope="module")
def offline_answers(chat_model_dir) -> dict:
    """The offline engine's answers (module scope: computed before `live_server` starts the server)."""
    with vllm_engine(chat_model_dir) as engine:
        return {"generated": engine.generate(GEN_CHATS, GENERATION),
                "scored": engine.score_yes_no(YES_NO_CHATS, JSON_PREFIX)}


@pytest.fixture
def client(live_server, monkeypatch):
    monkeypatch.setenv("GAREN_TEST_KEY", SECRET)  # vllm serve without --api-key accepts any key
    return OpenAIBackend(SERVED_NAME, base_url=live_server.base_url, api_key_env="GAREN_TEST_KEY", concurrency=4,
                         max_retries=1, backoff=0.2, timeout=120)


def test_chat_generation_equals_offline_vllm(client, offline_answers):
    served, local = client.generate(GEN_CHATS, GENERATION), offline_answers["generated"]
    assert [c.text for c in served] == [c.text for c in local]
    assert [c.input_tokens for c in served] == [c.input_tokens for c in local]  # the same rendered prompt
    assert SECRET not in client.id and client.id == f"openai:{client.base_url}:{SERVED_NAME}"


def test_yes_no_logprob_scores_equal_offline_vllm(client, offline_answers):
    served = client.score_yes_no(YES_NO_CHATS, JSON_PREFIX)  # prefix continued: continue_final_message
    local = offline_answers["scored"]
    gap = max(abs(a.score - b.score) for a, b in zip(served, local))
    print(f"max |dP(yes)| server vs offline vLLM ({len(YES_NO_CHATS)} prompts) = {gap:.5f}")
    assert gap <= TOLERANCE
    assert [c.input_tokens for c in served] == [c.input_tokens for c in local]


@pytest.mark.parametrize("prefix_mode", ["continue", "drop"])
def test_yes_no_prompts_batched_on_completions_score_as_chat_requests(client, chat_model_dir, prefix_mode):
    """yes_no_per_request: the chats rendered here by the served model's tokenizer and template (the one the server
    is given), sent as prompt lists to /v1/completions, score as one chat request each and count the same prompt
    tokens; 3 per request over the pairs leaves one request short, which must still be read in order."""
    client.prefix_mode = prefix_mode
    batched = OpenAIBackend(SERVED_NAME, base_url=client.base_url, api_key_env=None, concurrency=2, max_retries=1,
                            backoff=0.2, timeout=120, prefix_mode=prefix_mode, yes_no_per_request=3,
                            tokenizer=str(chat_model_dir))
    assert batched.id == client.id  # the same cache entries
    by_chat = client.score_yes_no(YES_NO_CHATS, JSON_PREFIX)
    by_batch = batched.score_yes_no(YES_NO_CHATS, JSON_PREFIX)
    gap = max(abs(a.score - b.score) for a, b in zip(by_batch, by_chat))
    print(f"max |dP(yes)| batched vs chat requests, prefix {prefix_mode} ({len(YES_NO_CHATS)} prompts) = {gap:.6f}")
    assert len(by_batch) == len(YES_NO_CHATS) and gap <= TOLERANCE
    assert [c.input_tokens for c in by_batch] == [c.input_tokens for c in by_chat]
    if prefix_mode == "continue":  # the pairs are told apart, so the order is checked (without the JSON prefix
        # Gemma 270M lists neither label among its top answers, and every pair scores 0.5 both ways)
        assert len({round(c.score, 4) for c in by_chat}) > 1


def test_dropping_the_prefix_still_scores(client):
    client.prefix_mode = "drop"
    [answer] = client.score_yes_no([plain_yes_no(*PAIRS[0])], JSON_PREFIX)
    assert 0.0 <= answer.score <= 1.0


def test_wrong_model_name_is_a_clear_error_without_the_key(client):
    client.model = "no-such-model"
    with pytest.raises(GarenError) as err:
        client.generate(GEN_CHATS[:1], SamplingParams(max_tokens=2))
    assert "HTTP 404" in str(err.value) and SECRET not in str(err.value)
