"""Rendering a chat into the prompt text a local model sees (transformers and vLLM share this).

A backend's ``chat_template_kwargs`` (e.g. ``{enable_thinking: false}`` for Qwen3, whose template thinks by
default) go to every rendering of its chats: plain, with tools, and the yes/no prompt. The tokenizer carries them
(``use_chat_template``), so each of those paths renders through ``apply_template`` with the same arguments.

A template may open the model's thought itself (Qwen3's thinking models end the prompt with ``<think>``): the
answer then starts inside the thought and never writes ``<think>``. Backends put the opening back in front of such
an answer (``opened_thought``), so the parsers know what is thought: one cut before ``</think>`` is a thought
without an answer, never a ranking read from the thought.
"""

from __future__ import annotations

import json
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


# what apply_template sets itself: a template argument of the same name would fight it
RENDERING_ARGS = ("conversation", "tools", "documents", "tokenize", "add_generation_prompt", "continue_final_message",
                  "return_dict", "chat_template")


def check_template_args(args, where: str) -> None:
    """``chat_template_kwargs`` is a mapping from names to JSON values, none of them one apply_template sets."""
    if not isinstance(args, dict):
        raise GarenError(f"invalid setting {where}: expected a mapping of chat template arguments, e.g. "
                         "{enable_thinking: false}")
    for name, value in args.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise GarenError(f"invalid setting {where}: {name!r} is not a template variable's name")
        if name in RENDERING_ARGS:
            raise GarenError(f"invalid setting {where}.{name}: set by the backend itself; give only the "
                             "template's own variables")
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            raise GarenError(f"invalid setting {where}.{name}: expected a JSON value (text, number, true/false, list, "
                             "mapping)") from None


def template_args_tag(args: dict) -> str:
    """What a backend's id adds for its chat template arguments (nothing without any): they change every prompt."""
    return f"|template={json.dumps(args, sort_keys=True, ensure_ascii=False)}" if args else ""


def apply_template(tokenizer, chat: Chat, **rendering) -> str:
    """The chat template's text for ``chat`` with the generation prompt (unless ``rendering`` says otherwise) and the
    backend's template arguments."""
    args = getattr(tokenizer, "garen_template_args", None) or {}
    return tokenizer.apply_chat_template(chat, tokenize=False, **{"add_generation_prompt": True, **rendering}, **args)


def opened_thought(prompt: str) -> str:
    """``"<think>\n"`` when the rendered prompt ends by opening a thought (the answer continues it), else ``""``."""
    return "<think>\n" if prompt.rstrip().endswith("<think>") else ""


def use_chat_template(tokenizer, model: str, chat_template: str | None, template_args: dict | None = None) -> None:
    """Give the tokenizer ``chat_template`` (a Jinja file or the template text) when set, and the template arguments
    every rendering passes, then refuse a tokenizer that has no template: a made-up transcript would change every
    prompt, and for the reranker and navigator every score."""
    tokenizer.garen_template_args = dict(template_args or {})
    if chat_template:
        path = Path(chat_template)
        tokenizer.chat_template = path.read_text(encoding="utf-8") if path.is_file() else chat_template
    if not getattr(tokenizer, "chat_template", None):
        raise GarenError(f"model '{model}' has no chat template; set chat_template: <a .jinja file> in its model spec "
                         "(or put chat_template.jinja in the model folder)")


def render_chat(tokenizer, chat: Chat) -> str:
    """The tokenizer's own chat template with the generation prompt (a system turn folded into the first user turn
    for templates that reject one). No template, or one that cannot render the chat, is an error, never a guess."""
    if not getattr(tokenizer, "chat_template", None):
        use_chat_template(tokenizer, tokenizer.name_or_path, None)
    failure = None
    for candidate in (chat, merge_system(chat)):
        try:
            return apply_template(tokenizer, candidate)
        except Exception as err:  # some templates raise on roles they do not support
            failure = err
    raise GarenError(f"the chat template of model '{tokenizer.name_or_path}' cannot render this chat "
                     f"({type(failure).__name__}: {str(failure)[:200]}); give the model spec a chat_template that can")


def render_as_served(tokenizer, chat: Chat, assistant_prefix: str = "") -> str:
    """The prompt text an OpenAI-compatible server (vLLM, SGLang) renders on its chat path: the template with the
    generation prompt or, with a prefix, the chat ending in an assistant turn that holds it, continued
    (``continue_final_message``, ``add_generation_prompt`` false). Not ``render_chat`` + prefix: a template that
    writes its own think block after the generation prompt (Qwen3 with enable_thinking false) would get two. A
    system turn is not folded, as the server does not fold it; a chat the template cannot render is an error."""
    try:
        if assistant_prefix:
            continued = [*chat, {"role": "assistant", "content": assistant_prefix}]
            return apply_template(tokenizer, continued, add_generation_prompt=False, continue_final_message=True)
        return apply_template(tokenizer, chat)
    except Exception as err:  # the template's own refusal (an unknown role), or a template that drops the prefix
        raise GarenError(f"the chat template of model '{tokenizer.name_or_path}' cannot render this chat as "
                         f"a server would ({type(err).__name__}: {str(err).splitlines()[0][:200]})") from None


def yes_no_token_ids(tokenizer) -> tuple[int, int]:
    """First token of "yes" and of "no" (Qwen3-Reranker: ``tokenizer("yes").input_ids[0]``)."""
    yes = tokenizer("yes", add_special_tokens=False).input_ids[0]
    no = tokenizer("no", add_special_tokens=False).input_ids[0]
    return yes, no
