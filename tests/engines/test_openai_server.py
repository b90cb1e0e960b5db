"""The OpenAI-compatible backend against a real `vllm serve` on 127.0.0.1: the offline engine's answers."""

from __future__ import annotations

import pytest

from garen_infer.errors import GarenError
from garen_infer.llm.backends.openai_backend import OpenAIBackend
from garen_infer.llm.types import SamplingParams

from .engine_support import GEN_CHATS, JSON_PREFIX, PAIRS, SERVED_NAME, TOLERANCE, plain_yes_no

SECRET = "sk-engine-test-DO-NOT-LOG-1234567890"


@pytest.fixture
def client(live_server, monkeypatch):
    monkeypatch.setenv("GAREN_TEST_KEY", SECRET)  # vllm serve without --api-key accepts any key
    return OpenAIBackend(SERVED_NAME, base_url=live_server.base_url, api_key_env="GAREN_TEST_KEY", concurrency=4,
                         max_retries=1, backoff=0.2, timeout=120)


def test_chat_generation_equals_offline_vllm(client, offline):
    params = SamplingParams(max_tokens=32)
    served = client.generate(GEN_CHATS, params)
    local = offline.generate(GEN_CHATS, params)
    assert [c.text for c in served] == [c.text for c in local]
    assert [c.input_tokens for c in served] == [c.input_tokens for c in local]  # the same rendered prompt
    assert SECRET not in client.id and client.id == f"openai:{client.base_url}:{SERVED_NAME}"


def test_yes_no_logprob_scores_equal_offline_vllm(client, offline):
    chats = [plain_yes_no(q, d) for q, d in PAIRS]
    served = client.score_yes_no(chats, JSON_PREFIX)  # prefix continued: continue_final_message
    local = offline.score_yes_no(chats, JSON_PREFIX)
    gap = max(abs(a.score - b.score) for a, b in zip(served, local))
    print(f"max |dP(yes)| server vs offline vLLM ({len(chats)} prompts) = {gap:.5f}")
    assert gap <= TOLERANCE
    assert [c.input_tokens for c in served] == [c.input_tokens for c in local]


def test_dropping_the_prefix_still_scores(client):
    client.prefix_mode = "drop"
    [answer] = client.score_yes_no([plain_yes_no(*PAIRS[0])], JSON_PREFIX)
    assert 0.0 <= answer.score <= 1.0


def test_wrong_model_name_is_a_clear_error_without_the_key(client):
    client.model = "no-such-model"
    with pytest.raises(GarenError) as err:
        client.generate(GEN_CHATS[:1], SamplingParams(max_tokens=2))
    assert "HTTP 404" in str(err.value) and SECRET not in str(err.value)
