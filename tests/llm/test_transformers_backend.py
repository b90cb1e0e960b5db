"""The transformers backend gives a prompt the same answer whatever batch it shares (left padding)."""

from __future__ import annotations

import pytest

from garen_infer.llm.backends.transformers_backend import TransformersBackend
from garen_infer.llm.prompts import QWEN3_ASSISTANT_PREFIX, yes_no
from garen_infer.llm.types import SamplingParams


@pytest.fixture(scope="module")
def backend(tiny_model_dir):
    return TransformersBackend(model=str(tiny_model_dir), device="cpu", batch_size=4)


def test_yes_no_scores_do_not_depend_on_the_batch(backend):
    chats = [yes_no("q", "short"), yes_no("a longer query about graphs", "a much longer document " * 6)]
    together = [c.score for c in backend.score_yes_no(chats, QWEN3_ASSISTANT_PREFIX)]
    alone = [backend.score_yes_no([c], QWEN3_ASSISTANT_PREFIX)[0].score for c in chats]
    assert together == pytest.approx(alone, abs=1e-5)
    assert all(0.0 <= p <= 1.0 for p in together)


def test_greedy_generation_does_not_depend_on_the_batch(backend):
    chats = [[{"role": "user", "content": "hi"}], [{"role": "user", "content": "rank these passages " * 5}]]
    params = SamplingParams(max_tokens=6)
    together = [c.text for c in backend.generate(chats, params)]
    alone = [backend.generate([c], params)[0].text for c in chats]
    assert together == alone


def test_a_model_without_a_chat_template_is_refused_until_one_is_given(tiny_model_dir, tmp_path):
    """A plain "User: ... Assistant:" transcript would change every prompt (and every navigator score): refused in one
    line that names the fix; the chat_template field (a .jinja file) gives the template."""
    import json
    import shutil

    from garen_infer.errors import GarenError

    bare = tmp_path / "bare"
    shutil.copytree(tiny_model_dir, bare)
    template = (
        (bare / "chat_template.jinja").read_text(encoding="utf-8")
        if (bare / "chat_template.jinja").exists()
        else None
    )
    (bare / "chat_template.jinja").unlink(missing_ok=True)
    config = json.loads((bare / "tokenizer_config.json").read_text(encoding="utf-8"))
    template = template or config.pop("chat_template")
    config.pop("chat_template", None)
    (bare / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(GarenError, match="has no chat template; set chat_template") as refused:
        TransformersBackend(model=str(bare), device="cpu")
    assert "\n" not in str(refused.value)
    (tmp_path / "template.jinja").write_text(template, encoding="utf-8")
    given = TransformersBackend(model=str(bare), device="cpu", chat_template=str(tmp_path / "template.jinja"))
    reference = TransformersBackend(model=str(tiny_model_dir), device="cpu")
    chats = [yes_no("q", "a document")]
    assert (
        given.score_yes_no(chats, QWEN3_ASSISTANT_PREFIX)[0].score
        == reference.score_yes_no(chats, QWEN3_ASSISTANT_PREFIX)[0].score
    )


def test_prompts_are_cut_to_the_models_context_minus_the_answer_and_every_cut_is_counted(backend, tiny_model_dir):
    """The tiny Qwen3 has a 4,096-token context. Unset, max_length follows it (a fixed 8,192 let longer prompts
    through uncut); a cut says how many tokens it took, and the limit is part of the id (so of every cache key)."""
    long_doc = " ".join(["volcano ash graph query"] * 1500)  # several thousand tokens
    [scored] = backend.score_yes_no([yes_no("q", long_doc)], QWEN3_ASSISTANT_PREFIX)
    assert scored.input_tokens == 4096 - 1 and scored.truncated_tokens > 0
    [generated] = backend.generate([[{"role": "user", "content": long_doc}]], SamplingParams(max_tokens=8))
    assert generated.input_tokens <= 4096 - 8 and generated.truncated_tokens > 0
    [short] = backend.score_yes_no([yes_no("q", "short")], QWEN3_ASSISTANT_PREFIX)
    assert short.truncated_tokens == 0
    assert "|prompt<=4096" in backend.id

    capped = TransformersBackend(model=str(tiny_model_dir), device="cpu", max_length=256)
    [cut] = capped.score_yes_no([yes_no("q", long_doc)], QWEN3_ASSISTANT_PREFIX)
    assert (
        cut.input_tokens == 256
        and cut.input_tokens + cut.truncated_tokens == scored.input_tokens + scored.truncated_tokens
    )
    assert capped.id != backend.id and "|prompt<=256" in capped.id
