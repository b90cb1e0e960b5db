"""Rendering a chat into the prompt text a local model sees (transformers and vLLM share this)."""

from __future__ import annotations

from pathlib import Path

from garen_infer.errors import GarenError
from garen_infer.llm.types import Chat


def merge_system(chat: Chat) -> Chat:
    """Fold a system turn into the first user turn, for templates (e.g. Gemma's) that reject a system role."""
    if not chat or chat[0]["role"] != "system":
        return chat
    system, rest = chat[0]["content"], [dict(m) for m in chat[1:]]
    if rest and rest[0]["role"] == "user":
        rest[0]["content"] = f"{system}\n\n{rest[0]['content']}"
        return rest
    return [{"role": "user", "content": system}, *rest]


def use_chat_template(tokenizer, model: str, chat_template: str | None) -> None:
    """Give the tokenizer ``chat_template`` (a Jinja file or the template text) when set, then refuse a tokenizer that
    has none: a made-up transcript would change every prompt, and for the reranker and navigator every score."""
    if chat_template:
        path = Path(chat_template)
        tokenizer.chat_template = path.read_text(encoding="utf-8") if path.is_file() else chat_template
    if not getattr(tokenizer, "chat_template", None):
        raise GarenError(f"model '{model}' has no chat template; set chat_template: <a .jinja file> in its model spec "
                         "(or put chat_template.jinja in the model folder)")


def render_chat(tokenizer, chat: Chat) -> str:
    """The tokenizer's own chat template with the generation prompt (a system turn folded into the first user turn
    for templates that reject one). No template, or one that cannot render the chat, is an error, never a guess."""
    use_chat_template(tokenizer, tokenizer.name_or_path, None)
    failure = None
    for candidate in (chat, merge_system(chat)):
        try:
            return tokenizer.apply_chat_template(candidate, tokenize=False, add_generation_prompt=True)
        except Exception as err:  # noqa: BLE001 - some templates raise on roles they do not support
            failure = err
    raise GarenError(f"the chat template of model '{tokenizer.name_or_path}' cannot render this chat ({type(failure).__name__}: "
                     f"{str(failure)[:200]}); give the model spec a chat_template that can")


def yes_no_token_ids(tokenizer) -> tuple[int, int]:
    """First token of "yes" and of "no" (Qwen3-Reranker: ``tokenizer("yes").input_ids[0]``)."""
    yes = tokenizer("yes", add_special_tokens=False).input_ids[0]
    no = tokenizer("no", add_special_tokens=False).input_ids[0]
    return yes, no
