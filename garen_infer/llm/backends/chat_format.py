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
    return "\n\n".join(lines) + "\n\nAssistant: "


def yes_no_token_ids(tokenizer) -> tuple[int, int]:
    """First token of "yes" and of "no" (Qwen3-Reranker: ``tokenizer("yes").input_ids[0]``)."""
    yes = tokenizer("yes", add_special_tokens=False).input_ids[0]
    no = tokenizer("no", add_special_tokens=False).input_ids[0]
    return yes, no
