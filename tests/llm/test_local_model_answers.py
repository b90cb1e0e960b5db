"""What local models are asked, and how their answers end: ``chat_template_kwargs: {enable_thinking: false}`` turns
a Qwen3 model's thinking off in every prompt the backend renders (as ``vllm serve`` does with the same field), and
every answer says why it ended (``finish_reason``)."""

from __future__ import annotations

import pytest

from garen_infer.errors import GarenError
from garen_infer.llm.backends.chat_format import render_chat
from garen_infer.llm.backends.tool_format import render_tool_chat
from garen_infer.llm.backends.yes_no_scoring import prompt_text
from garen_infer.llm.model_specs import check_model_spec
from garen_infer.llm.types import SamplingParams

# the tail of Qwen3's own template: with enable_thinking false, an empty thought opens the answer
QWEN3_LIKE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}{% endif %}"
)
CHAT = [{"role": "user", "content": "rank the passages"}]
EMPTY_THOUGHT = "<think>\n\n</think>\n\n"


@pytest.fixture(scope="module")
def backends(tiny_model_dir):
    from garen_infer.llm.backends.transformers_backend import TransformersBackend

    def make(**args):
        return TransformersBackend(str(tiny_model_dir), device="cpu", chat_template=QWEN3_LIKE, **args)

    return make(), make(chat_template_kwargs={"enable_thinking": False})


def test_thinking_off_reaches_every_rendering(backends):
    """Was: the transformers and vLLM backends had no way to pass enable_thinking: Qwen3 always thought."""
    thinking, quiet = backends
    tools = [{"type": "function", "function": {"name": "search", "description": "d",
                                               "parameters": {"type": "object", "properties": {}}}}]
    for render in (lambda b: render_chat(b.tokenizer, CHAT), lambda b: render_tool_chat(b.tokenizer, CHAT, tools),
                   lambda b: prompt_text(b.tokenizer, CHAT, "")):
        assert render(quiet).endswith(EMPTY_THOUGHT) and not render(thinking).endswith(EMPTY_THOUGHT)
    [answer] = quiet.generate([CHAT], SamplingParams(max_tokens=3))
    assert answer.input_tokens > thinking.generate([CHAT], SamplingParams(max_tokens=3))[0].input_tokens


def test_the_arguments_are_part_of_the_backend_id(backends):
    thinking, quiet = backends
    assert quiet.id == thinking.id + '|template={"enable_thinking": false}'  # cached answers never cross over


@pytest.mark.parametrize("backend", ["transformers", "vllm"])
@pytest.mark.parametrize("args, says", [
    ("no", "expected a mapping"),
    ({"tokenize": True}, "chat_template_kwargs.tokenize: set by the backend itself"),
    ({"enable thinking": False}, "is not a template variable's name"),
    ({"budget": float("nan")}, "expected a JSON value"),
])
def test_template_arguments_are_checked_with_the_preset(backend, args, says):
    with pytest.raises(GarenError, match=says):
        check_model_spec({"backend": backend, "model": "Qwen/Qwen3-8B", "chat_template_kwargs": args},
                         "models.reranker")


def test_good_template_arguments_pass_the_preset_check():
    check_model_spec(
        {"backend": "vllm", "model": "Qwen/Qwen3-8B", "chat_template_kwargs": {"enable_thinking": False}},
        "models.reranker",
    )


def test_every_local_answer_says_why_it_ended(backends):
    """Was: finish_reason stayed empty for local models, so an answer cut at max_tokens passed for a finished one."""
    _, quiet = backends
    for answer in quiet.generate([CHAT, [{"role": "user", "content": "yes or no"}]], SamplingParams(max_tokens=3)):
        assert answer.finish_reason in ("stop", "length")
        assert answer.finish_reason == "stop" or answer.output_tokens == 3  # cut: every answer token was used


# the tail of Qwen3's thinking models' templates (Qwen3-*-Thinking-2507): the prompt itself opens the thought
OPENS_THE_THOUGHT = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}"
)


def test_a_thought_the_template_opened_is_put_back_in_front_of_the_answer(tiny_model_dir):
    """Was: the answer of such a model began inside its thought without writing <think>, so a thought cut at
    max_tokens before </think> was read for ids as if it were the ranking."""
    from garen_infer.llm.backends.chat_format import opened_thought
    from garen_infer.llm.backends.transformers_backend import TransformersBackend
    from garen_infer.llm.permutation import read_permutation

    backend = TransformersBackend(str(tiny_model_dir), device="cpu", chat_template=OPENS_THE_THOUGHT)
    [answer] = backend.generate([CHAT], SamplingParams(max_tokens=3))
    assert answer.text.startswith("<think>\n")
    prompt = render_chat(backend.tokenizer, CHAT)
    cut = opened_thought(prompt) + "Passage [3] seems closer than [1], but"
    assert read_permutation(cut, 3).problems == ["thought_without_answer"]
    assert read_permutation(opened_thought(prompt) + "[3] first.</think>\n[2] > [1] > [3]", 3).order == [1, 0, 2]
    thinking = TransformersBackend(str(tiny_model_dir), device="cpu", chat_template=QWEN3_LIKE)
    assert opened_thought(render_chat(thinking.tokenizer, [{"role": "user", "content": "quote: <think>"}])) == ""
    quiet = TransformersBackend(str(tiny_model_dir), device="cpu", chat_template=QWEN3_LIKE,
                                chat_template_kwargs={"enable_thinking": False})
    assert opened_thought(render_chat(quiet.tokenizer, CHAT)) == ""  # an empty thought, closed: the answer follows it
