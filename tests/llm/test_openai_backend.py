"""The OpenAI-compatible backend's protocol and error paths, against a stdlib HTTP server on 127.0.0.1 that
answers with canned OpenAI-format JSON. (Real-server checks: tests/engines/test_openai_server.py.)"""

from __future__ import annotations

import json
import math
import time

import pytest
from openai_server import chat_answer

from garen_infer.errors import GarenError
from garen_infer.llm.backends.openai_answers import label_logprob
from garen_infer.llm.backends.openai_backend import OpenAIBackend
from garen_infer.llm.types import SamplingParams

KEY = "sk-test-SECRET-0123456789"
CHAT = [{"role": "user", "content": "Is the sky blue?"}]


@pytest.fixture
def backend(server, monkeypatch):
    monkeypatch.setenv("GAREN_TEST_KEY", KEY)
    return OpenAIBackend("m", base_url=server.base_url + "/", api_key_env="GAREN_TEST_KEY", max_retries=2,
                         backoff=0.01, timeout=5)


def logprob_answer(token, logprob, tops):
    return {"choices": [{"message": {"content": token}, "logprobs": {"content": [
        {"token": token, "logprob": logprob, "top_logprobs": [{"token": t, "logprob": lp} for t, lp in tops]}
    ]}}]}


def test_generate_sends_the_chat_and_the_key_header_but_never_shows_the_key(server, backend):
    server.answer((200, chat_answer("Paris", 11, 1)))
    [out] = backend.generate([CHAT], SamplingParams(max_tokens=5, temperature=0.0, seed=3))
    assert (out.text, out.input_tokens, out.output_tokens) == ("Paris", 11, 1)
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == f"Bearer {KEY}"
    assert request["body"] == {"model": "m", "messages": CHAT, "temperature": 0.0, "top_p": 1.0, "seed": 3,
                               "max_tokens": 5}
    assert backend.id == f"openai:{server.base_url}:m"
    assert KEY not in repr(backend) and KEY not in backend.id


def test_yes_no_score_from_top_logprobs_and_prefix_continuation(server, backend):
    server.answer((200, logprob_answer("yes", -0.2, [("yes", -0.2), (" No", -1.0), ("no", -2.0)])))
    [out] = backend.score_yes_no([CHAT], "<think>\n\n</think>\n\n")
    assert out.score == pytest.approx(1 / (1 + math.exp(-2.0 + 0.2)))  # the exact "no" wins over " No"
    body = server.requests[0]["body"]
    assert body["messages"][-1] == {"role": "assistant", "content": "<think>\n\n</think>\n\n"}
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    assert (body["max_tokens"], body["logprobs"], body["top_logprobs"]) == (1, True, 20)

    backend.prefix_mode = "drop"
    backend.score_yes_no([CHAT], "<think>\n\n</think>\n\n")
    assert server.requests[1]["body"]["messages"] == CHAT and "continue_final_message" not in server.requests[1]["body"]


def test_label_matching_exact_then_spaced_or_capitalised_then_minus_ten():
    assert label_logprob([(" Yes", -1.0), ("yes", -3.0)], "yes") == -3.0
    assert label_logprob([(" Yes", -1.0), ("YES", -0.5)], "yes") == -0.5
    assert label_logprob([("maybe", -0.1)], "no") == -10.0


def test_a_label_missing_from_the_top_logprobs_never_outranks_a_listed_one(server, backend):
    """A model sure of neither label: "no" is the answer at -12, "yes" is not listed, so it is at most -12. Counting
    it as -10 (Qwen3-Reranker's constant) would rank this document as relevant."""
    listed = [(f"w{i}", -1.0 - i * 0.5) for i in range(19)] + [("no", -12.0)]
    server.answer((200, logprob_answer("no", -12.0, listed)))
    [out] = backend.score_yes_no([CHAT], "")
    assert out.score <= 0.5
    assert label_logprob(listed, "yes") == -12.0


def test_a_server_without_logprobs_is_a_clear_error(server, backend):
    server.answer((200, chat_answer("yes")))
    with pytest.raises(GarenError, match="returned no logprobs"):
        backend.score_yes_no([CHAT], "")


def test_retries_5xx_and_429_with_backoff_then_succeeds(server, backend):
    server.answer((503, {"error": {"message": "loading"}}),
                  (429, {"error": "slow down"}, 0.0, {"Retry-After": "0"}), (200, chat_answer("ok")))
    [out] = backend.generate([CHAT], SamplingParams())
    assert out.text == "ok" and len(server.requests) == 3


def test_unreachable_server_is_named_after_retries(backend, monkeypatch):
    backend.base_url = "http://127.0.0.1:9/v1"  # the discard port: nothing listens
    start = time.perf_counter()
    with pytest.raises(GarenError) as err:
        backend.generate([CHAT], SamplingParams())
    assert "server at http://127.0.0.1:9/v1 is not answering" in str(err.value) and "3 attempts" in str(err.value)
    assert KEY not in str(err.value)
    assert time.perf_counter() - start < 5


def test_timeout_counts_as_not_answering(server, backend):
    server.answer((200, chat_answer(), 1.0, {}))
    backend.timeout, backend.max_retries = 0.2, 1
    with pytest.raises(GarenError, match="is not answering \\(no answer within 0.2 s; 2 attempts\\)"):
        backend.generate([CHAT], SamplingParams())


def test_client_errors_fail_at_once_and_an_echoed_key_is_redacted(server, backend):
    server.answer((401, {"error": {"message": f"bad key {KEY}"}}))
    with pytest.raises(GarenError) as err:
        backend.generate([CHAT], SamplingParams())
    assert "HTTP 401" in str(err.value) and "bad key ***" in str(err.value) and KEY not in str(err.value)
    assert len(server.requests) == 1


def test_a_batch_runs_concurrently_up_to_the_limit_and_keeps_order(server, backend):
    server.answer((200, lambda body: chat_answer(body["messages"][0]["content"]), 0.1, {}))
    backend.concurrency = 3
    chats = [[{"role": "user", "content": f"q{i}"}] for i in range(7)]
    assert [c.text for c in backend.generate(chats, SamplingParams())] == [f"q{i}" for i in range(7)]
    assert 2 <= server.max_in_flight <= 3


# ---- the key: never written, never shown, never cached, whole or in part ------------------------------------------
def pieces_of_the_key(text: str) -> list[str]:
    """Every run of 8 or more of the key's characters found in ``text``."""
    return [KEY[i : i + 8] for i in range(len(KEY) - 7) if KEY[i : i + 8] in text]


PARTIAL_ECHOES = [
    f"Incorrect API key provided: {KEY[:10]}**********{KEY[-8:]}",  # OpenAI's style: first and last characters
    f"invalid token '{KEY[:-3]}'",  # the key cut short
    f"key ...{KEY[6:20]}... rejected",  # a piece from the middle
]


@pytest.mark.parametrize("echo", PARTIAL_ECHOES, ids=["first-and-last", "cut-short", "middle"])
def test_a_partly_echoed_key_is_redacted_in_messages_and_logs(server, backend, echo, caplog):
    """Was: only the exact key was replaced, so 'sk-test-SE**********23456789' reached the terminal and the log."""
    server.answer((503, {"error": {"message": echo}}), (401, {"error": {"message": echo}}))
    with caplog.at_level("WARNING"), pytest.raises(GarenError) as err:
        backend.generate([CHAT], SamplingParams())
    assert "HTTP 401" in str(err.value) and "***" in str(err.value)
    assert pieces_of_the_key(str(err.value)) == [] and pieces_of_the_key(caplog.text) == []
    assert "HTTP 503" in caplog.text  # the retry was logged, redacted


def test_an_answer_that_echoes_the_key_is_redacted_before_it_is_cached(server, backend, tmp_path):
    """Was: a server answering 200 with the key in its text (a proxy's error page, a model repeating its input)
    had it returned and stored verbatim in the response cache."""
    from garen_infer.llm.backends import CachedBackend
    from garen_infer.llm.cache import ResponseCache

    server.answer((200, chat_answer(f"error: the key {KEY} has no quota (key prefix {KEY[:12]})")))
    cached = CachedBackend(backend, ResponseCache(tmp_path / "cache.sqlite"))
    [out] = cached.generate([CHAT], SamplingParams())
    assert out.text == "error: the key *** has no quota (key prefix ***)"
    [again] = cached.generate([CHAT], SamplingParams())
    assert again.cached and again.text == out.text
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir())  # the database and its write-ahead log
    assert pieces_of_the_key(stored.decode("latin-1")) == []


def test_redaction_leaves_text_without_the_key_alone():
    from garen_infer.llm.backends.openai_requests import redact

    # pieces shorter than 8 characters ("sk-test", "SECRET") stay; a run of 8 ("01234567") is an echo
    assert redact("sk-test and SECRET are words; 01234567 is not", KEY) == "sk-test and SECRET are words; *** is not"
    assert redact("EMPTY means no key; EMPTYISH", "EMPTY") == "*** means no key; ***ISH"  # a short key: whole only
    assert redact("no key at all", None) == "no key at all"


@pytest.mark.parametrize("value, why", [
    (KEY, "it contains '-'"),
    ("gsk_" + "aB3" * 17, "looks like a key itself"),  # a key made of name characters: mixed case and digits
    ("0123456789abcdef0123456789abcdef", "it starts with a digit"),
    ("deadbeefdeadbeefdeadbeefdeadbeef", "looks like a key itself"),  # 32 hex characters
    ("", "it is empty"),
])
def test_a_key_given_as_api_key_env_is_refused_before_anything_is_written(value, why, tmp_path, capsys, monkeypatch):
    """Was: ``api_key_env: <the key>`` ran (with no Authorization header) and wrote the key into config.json."""
    from garen_infer.doors.cli import main

    monkeypatch.delenv(value, raising=False) if value else None
    spec = json.dumps({"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": value})
    code = main(["run", "--dataset", str(tmp_path / "absent"), "--index", str(tmp_path / "i"), "--method", "rerank",
                 "--set", f"models.reranker={spec}", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("garen-infer run: error: invalid setting models.reranker.api_key_env: the value "
                          f"({len(value)} characters) is not the name of an environment variable (") and why in err
    assert (value == "" or value not in err) and not (tmp_path / "run").exists()
    with pytest.raises(GarenError, match="api_key_env of the openai backend"):
        OpenAIBackend("m", api_key_env=value)  # the Python API too


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", "AZURE_OPENAI_API_KEY_WESTEUROPE_2", "my_key", "EMPTY"])
def test_ordinary_variable_names_are_accepted_set_or_not(name, monkeypatch):
    from garen_infer.llm.backends.openai_requests import check_api_key_env

    monkeypatch.delenv(name, raising=False)
    check_api_key_env(name, "api_key_env")
    monkeypatch.setenv("Key2Of3", KEY)  # a set variable is a name, whatever it looks like
    check_api_key_env("Key2Of3", "api_key_env")
