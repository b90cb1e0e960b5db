"""Rendering a chat into the prompt text a local model sees (transformers and vLLM share this)."""

from __future__ import annotations

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


def render_chat(tokenizer, chat: Chat) -> str:
    """The tokenizer's own chat template with the generation prompt; a plain transcript when it has none."""
    if getattr(tokenizer, "chat_template", None):
        for candidate in (chat, merge_system(chat)):
            try:
                return tokenizer.apply_chat_template(candidate, tokenize=False, add_generation_prompt=True)
            except Exception:  # noqa: BLE001 - some templates raise on roles they do not support
                continue
    lines = [f"{m['role'].capitalize()}: {m['content']}" for m in chat]
    return _bos_text(tokenizer) + "\n\n".join(lines) + "\n\nAssistant: "


def _bos_text(tokenizer) -> str:
    """The BOS token as text when the tokenizer would add one: backends tokenise the rendered text without special
    tokens (templates write BOS themselves), so the plain transcript must write it too; Gemma without it babbles."""
    bos, bos_id = getattr(tokenizer, "bos_token", None), getattr(tokenizer, "bos_token_id", None)
    if not bos or bos_id is None:
        return ""
    return bos if tokenizer("", add_special_tokens=True).input_ids[:1] == [bos_id] else ""


def yes_no_token_ids(tokenizer) -> tuple[int, int]:
    """First token of "yes" and of "no" (Qwen3-Reranker: ``tokenizer("yes").input_ids[0]``)."""
    yes = tokenizer("yes", add_special_tokens=False).input_ids[0]
    no = tokenizer("no", add_special_tokens=False).input_ids[0]
    return yes, no
