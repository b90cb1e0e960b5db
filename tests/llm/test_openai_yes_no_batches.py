"""Several yes/no prompts in one request (``yes_no_per_request``): the chats rendered here as the server renders
them, sent to /completions as a prompt list, scored, counted and cached exactly as one chat request each would be.
The server is tests/openai_server.py's ``VllmYesNo``, which renders a chat with the model's template on its own
(as vLLM does) and draws P(yes) from the text it sees, so a prompt rendered differently here scores differently."""

from __future__ import annotations

import json
import math

import pytest
from openai_server import VllmYesNo

from garen_infer.errors import GarenError
from garen_infer.llm.backends import CachedBackend
from garen_infer.llm.backends.openai_backend import OpenAIBackend
from garen_infer.llm.cache import NoCache, ResponseCache, cache_key
from garen_infer.llm.prompts import QWEN3_ASSISTANT_PREFIX, yes_no
from garen_infer.llm.roles import LLMGenerator, LLMYesNoScorer
from garen_infer.running.engine_queue import Shape, engine_shape
from garen_infer.running.runner import RunConfig
from garen_infer.running.session import execute

# Qwen3's way: with enable_thinking false, the generation prompt itself holds an empty think block
THINKING_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}{% endif %}"
)
NO_THINKING = {"chat_template_kwargs": {"enable_thinking": False}}
CHATS = [yes_no(f"query {i % 3}", f"passage {i} about wings and lift") for i in range(10)]


@pytest.fixture(scope="module")
def tokenizer_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model's tokenizer with a template that reads a template argument, as Qwen3's does."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.chat_template = THINKING_TEMPLATE
    folder = tmp_path_factory.mktemp("thinking-tokenizer")
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture
def vllm_like(server, tokenizer_dir):
    from transformers import AutoTokenizer

    server.answer((200, VllmYesNo(AutoTokenizer.from_pretrained(tokenizer_dir))))
    return server


def backend(server, tokenizer_dir, per_request=1, **options):
    return OpenAIBackend("m", base_url=server.base_url, api_key_env=None, max_retries=2, backoff=0.01, timeout=5,
                         concurrency=3, extra_body=NO_THINKING, yes_no_per_request=per_request,
                         tokenizer=str(tokenizer_dir), **options)


def test_batched_scores_and_cache_entries_equal_one_chat_request_each(vllm_like, tokenizer_dir, tmp_path):
    one, batched = backend(vllm_like, tokenizer_dir), backend(vllm_like, tokenizer_dir, per_request=4)
    assert batched.id == one.id  # the cache key's model part: either path reuses the other's answers
    caches = {"one": ResponseCache(tmp_path / "one.sqlite"), "batched": ResponseCache(tmp_path / "batched.sqlite")}
    by_chat = CachedBackend(one, caches["one"]).score_yes_no(CHATS, QWEN3_ASSISTANT_PREFIX)
    sent_as_chats = len(vllm_like.requests)
    by_batch = CachedBackend(batched, caches["batched"]).score_yes_no(CHATS, QWEN3_ASSISTANT_PREFIX)

    assert sent_as_chats == 10 and len(vllm_like.requests) == 10 + 3  # 4 + 4 + 2 prompts
    assert [c.score for c in by_batch] == [c.score for c in by_chat]
    assert len({c.score for c in by_chat}) == 10 and all(0 < c.score < 1 for c in by_chat)
    keys = [cache_key(one.id, "yes_no", chat, QWEN3_ASSISTANT_PREFIX) for chat in CHATS]
    assert caches["batched"].get_many(keys) == caches["one"].get_many(keys)
    # vLLM ends a one-token answer with "length": a score is no cut answer, on either path
    assert all(c.input_tokens > 20 and c.output_tokens == 1 and c.finish_reason == "" for c in by_batch)

    request = vllm_like.requests[-1]
    assert request["path"] == "/v1/completions"
    body = request["body"]
    assert (body["max_tokens"], body["logprobs"], body["temperature"], body["add_special_tokens"]) == (
        1,
        20,
        0.0,
        False,
    )
    assert "chat_template_kwargs" not in body and "messages" not in body  # applied here, to the rendered text
    assert body["prompt"][0].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")  # one think block, continued
    assert sorted(len(r["body"]["prompt"]) for r in vllm_like.requests[10:]) == [2, 4, 4]


def test_answers_cached_by_the_chat_path_are_not_asked_again(vllm_like, tokenizer_dir, tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")
    first = CachedBackend(backend(vllm_like, tokenizer_dir), cache).score_yes_no(CHATS[:6], QWEN3_ASSISTANT_PREFIX)
    asked = len(vllm_like.requests)
    again = CachedBackend(backend(vllm_like, tokenizer_dir, per_request=8), cache).score_yes_no(
        CHATS, QWEN3_ASSISTANT_PREFIX
    )
    assert [c.cached for c in again] == [True] * 6 + [False] * 4
    assert [c.score for c in again[:6]] == [c.score for c in first]
    assert len(vllm_like.requests) == asked + 1 and len(vllm_like.requests[-1]["body"]["prompt"]) == 4


def test_prefix_dropped_renders_the_generation_prompt_as_the_server_does(vllm_like, tokenizer_dir):
    one = backend(vllm_like, tokenizer_dir, prefix_mode="drop").score_yes_no(CHATS[:3], QWEN3_ASSISTANT_PREFIX)
    batched = backend(vllm_like, tokenizer_dir, per_request=3, prefix_mode="drop").score_yes_no(
        CHATS[:3], QWEN3_ASSISTANT_PREFIX
    )
    assert [c.score for c in batched] == [c.score for c in one]


def test_a_failed_batch_is_retried_and_each_prompt_carries_the_retry(server, tokenizer_dir):
    from transformers import AutoTokenizer

    server.answer((503, {"error": {"message": "loading"}}),
                  (200, VllmYesNo(AutoTokenizer.from_pretrained(tokenizer_dir))))
    answers = backend(server, tokenizer_dir, per_request=4).score_yes_no(CHATS[:3], QWEN3_ASSISTANT_PREFIX)
    assert len(server.requests) == 2 and server.requests[0]["body"] == server.requests[1]["body"]
    assert [c.problems for c in answers] == [["retry:503"]] * 3
    expected = backend(server, tokenizer_dir).score_yes_no(CHATS[:3], QWEN3_ASSISTANT_PREFIX)
    assert [c.score for c in answers] == [c.score for c in expected]


def error_line(server, tokenizer_dir, answer) -> str:
    server.answer((200, answer))
    with pytest.raises(GarenError) as err:
        backend(server, tokenizer_dir, per_request=4).score_yes_no(CHATS[:2], QWEN3_ASSISTANT_PREFIX)
    assert "\n" not in str(err.value)
    return str(err.value)


def completions(choices, prompt_tokens=None):
    return {"choices": choices,
            **({"usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 1}} if prompt_tokens else {})}


def choice(index, listed=None):
    listed = listed or {"yes": math.log(0.7), "no": math.log(0.3)}
    token = max(listed, key=listed.get)  # the answer is the most likely token
    return {"index": index, "text": token, "finish_reason": "length",
            "logprobs": {"tokens": [token], "token_logprobs": [listed[token]], "top_logprobs": [listed]}}


def test_a_wrong_number_of_choices_is_one_error_line(server, tokenizer_dir):
    message = error_line(server, tokenizer_dir, completions([choice(0)]))
    assert "answered 1 choices to 2 prompts" in message and "yes_no_per_request: 1" in message
    assert "answered 2 choices to 2 prompts" in error_line(server, tokenizer_dir, completions([choice(0), choice(0)]))


def test_an_answer_without_logprobs_is_one_error_line(server, tokenizer_dir):
    bare = [{"index": i, "text": "yes", "finish_reason": "length"} for i in range(2)]
    assert "returned no logprobs for model 'm' on /completions" in error_line(server, tokenizer_dir, completions(bare))


@pytest.mark.parametrize("served", [3, 10**5])  # fewer tokens than the tokenizer counts, and more
def test_a_server_with_another_tokenizer_is_refused(server, tokenizer_dir, served):
    message = error_line(server, tokenizer_dir, completions([choice(0), choice(1)], prompt_tokens=served))
    assert f"counted {served} prompt tokens" in message and "not the served model's tokenizer" in message


def test_choices_are_read_by_their_index_and_labels_as_on_the_chat_path(server, tokenizer_dir):
    sure = {"yes": math.log(0.9), "no": math.log(0.1)}
    unsure = {" Yes": -0.1, "maybe": -3.0}  # "yes" only loosely, "no" missing: -10 as on the chat path
    server.answer((200, completions([choice(1, unsure), choice(0, sure)])))
    first, second = backend(server, tokenizer_dir, per_request=4).score_yes_no(CHATS[:2], "")
    assert first.score == pytest.approx(0.9)
    assert second.score == pytest.approx(1 / (1 + math.exp(-10.0 + 0.1)))


def test_a_tokenizer_that_cannot_be_loaded_is_one_error_line(server, tmp_path):
    with pytest.raises(GarenError) as err:
        OpenAIBackend("m", base_url=server.base_url, api_key_env=None, yes_no_per_request=8,
                      tokenizer=str(tmp_path / "absent"))
    assert "cannot be loaded" in str(err.value) and "set tokenizer:" in str(err.value) and "\n" not in str(err.value)
    assert len(server.requests) == 0


def test_the_setting_reaches_the_engine_shape_of_yes_no_roles_only(server, tokenizer_dir):
    batched = CachedBackend(backend(server, tokenizer_dir, per_request=8), NoCache())
    assert engine_shape(LLMYesNoScorer(batched), 64, "score") == Shape(3, 8)
    assert engine_shape(LLMGenerator(batched), 64, "generate") == Shape(3, 1)
    assert engine_shape(LLMYesNoScorer(CachedBackend(backend(server, tokenizer_dir), NoCache())), 64,
                        "score") == Shape(3, 1)


def test_a_garen_run_ranks_alike_with_and_without_batches(vllm_like, tokenizer_dir, tiny_dataset, full_index, tmp_path):
    """The whole path: the scheduler's lanes carry several navigator scores per call, each a prompt of one
    request, and the run's rankings and ledgers equal those of one request per score."""
    def run(name, per_request):
        spec = {"backend": "openai", "model": "m", "base_url": vllm_like.base_url, "api_key_env": None,
                "concurrency": 3,
                "extra_body": NO_THINKING, "yes_no_per_request": per_request, "tokenizer": str(tokenizer_dir)}
        config = RunConfig.build(method="garen", method_options={"budget": 12, "window": 4, "keep": 2},
                                 models={"reranker": {"backend": "embedding"}, "navigator": spec})
        execute(tiny_dataset, full_index, config, tmp_path / name, cache=NoCache(), log=lambda *_: None)
        return {r["qid"]: r for r in map(json.loads, (tmp_path / name / "trace.jsonl").read_text().splitlines())}

    one = run("one", 1)
    chat_requests = len(vllm_like.requests)
    batched = run("batched", 8)
    batch_requests = vllm_like.requests[chat_requests:]
    assert chat_requests > 8 and all(r["path"] == "/v1/completions" for r in batch_requests)
    assert sum(len(r["body"]["prompt"]) for r in batch_requests) == chat_requests > len(batch_requests)
    assert (tmp_path / "one" / "run.trec").read_bytes() == (tmp_path / "batched" / "run.trec").read_bytes()
    assert not any(r["ledger"].get("problems") for r in [*one.values(), *batched.values()])  # "length" is no cut here
    untimed = ("model_seconds", "roles")
    assert {q: {k: v for k, v in r["ledger"].items() if k not in untimed} for q, r in batched.items()} == \
        {q: {k: v for k, v in r["ledger"].items() if k not in untimed} for q, r in one.items()}


def test_garen_infer_options_documents_the_setting(capsys):
    from garen_infer.doors.cli import main

    assert main(["options", "openai"]) == 0
    out = capsys.readouterr().out
    assert (
        out.startswith("models.<role>: ")
        and "yes_no_per_request = 1    an integer >= 1\n      yes/no prompts" in out
    )
    assert "tokenizer = None    a string or null\n      the served model's tokenizer" in out

