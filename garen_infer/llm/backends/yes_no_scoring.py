"""Yes/no relevance with a causal LM, step by step: the code the transformers backend scores with and the code
garen_train trains through, so a trained navigator is scored at inference exactly as it was trained.

    prompt_text(tokenizer, chat, prefix)      the chat rendered by the model's template + the assistant prefix
    encode_left_padded(tokenizer, texts, n)   token ids without extra special tokens, cut in the middle, left padded
    prompt_limit(cap, context, answer)        the prompt tokens a backend keeps: its context minus the answer's
    yes_no_logits(net, ids, mask, yes, no)    the [no, yes] logits at the last position (differentiable)
    yes_log_odds(pair) / yes_probabilities(pair)  logit(yes) - logit(no), and P(yes) = softmax over [no, yes]
    yes_probability(yes, no) / unlisted_logprob  P(yes) from the two logprobs a server or an engine lists

Every backend reads P(yes) here: the transformers backend (and training) from the two logits of a batch, vLLM
and OpenAI-compatible servers from the answer token's listed logprobs. P(yes) is Qwen3-Reranker's score (Zhang
et al., Qwen3 Embedding, arXiv 2506.05176); the log-odds is what training losses work on, since sigmoid(log-odds)
is that same P(yes). torch is imported by the caller (this module stays import-light).
"""

from __future__ import annotations

import math

from garen_infer.errors import GarenError
from garen_infer.llm.backends.chat_format import render_chat
from garen_infer.llm.types import Chat

TOP_LOGPROBS = 20  # Qwen3-Reranker's vLLM code asks for 20
MISSING_LOGPROB = -10.0  # Qwen3-Reranker: a label outside the top 20 gets this logprob
# Keep the end of an over-long prompt (the question and the answer cue) and cut the middle (the documents).
PROMPT_TAIL_TOKENS = 128


def prompt_text(tokenizer, chat: Chat, assistant_prefix: str) -> str:
    """What the model reads before its one-token answer."""
    return render_chat(tokenizer, chat) + assistant_prefix


def truncate_middle(ids: list[int], max_length: int) -> list[int]:
    """At most ``max_length`` ids: the head and the last PROMPT_TAIL_TOKENS, the middle cut."""
    if len(ids) <= max_length:
        return ids
    return ids[: max_length - PROMPT_TAIL_TOKENS] + ids[-PROMPT_TAIL_TOKENS:]


def token_ids(tokenizer, text: str, max_length: int | None) -> tuple[list[int], int]:
    """The prompt's ids (no extra special tokens: chat templates already write any BOS token into the text), cut in
    the middle to ``max_length`` (None: whole), and how many tokens the cut removed."""
    ids = tokenizer(text, add_special_tokens=False).input_ids
    kept = ids if max_length is None else truncate_middle(ids, max_length)
    return kept, len(ids) - len(kept)


def prompt_limit(cap: int | None, context: int | None, answer_tokens: int, who: str) -> int | None:
    """Prompt tokens kept: the model's context minus the answer's tokens, and at most ``cap`` (a backend's
    ``max_length``) when set; None when neither bounds it."""
    limits = [n for n in (cap, None if context is None else context - answer_tokens) if n is not None]
    if not limits:
        return None
    if min(limits) <= PROMPT_TAIL_TOKENS:
        raise GarenError(f"{who}: {answer_tokens} answer tokens leave no room for a prompt in a context of "
                         f"{context} tokens{'' if cap is None else f' (max_length {cap})'}")
    return min(limits)


def backend_settings(prompt_cap: int | None, yes_no_logprobs: str | None = None) -> str:
    """What a local backend adds to its id besides the weights: the prompt limit (tokens kept at most before the
    answer's are taken off) and how yes/no logprobs are read, since both change answers."""
    return f"|prompt<={prompt_cap or 'any'}" + (f"|yes_no={yes_no_logprobs}" if yes_no_logprobs else "")


def encode_left_padded(tokenizer, texts: list[str], max_length: int | None, device="cpu"):
    """(input_ids, attention_mask, lengths, cut tokens): left padding puts every prompt's last token in the last
    column."""
    import torch

    rows, cuts = zip(*(token_ids(tokenizer, text, max_length) for text in texts))
    width = max(len(r) for r in rows)
    pad = tokenizer.pad_token_id
    input_ids = [[pad] * (width - len(r)) + r for r in rows]
    mask = [[0] * (width - len(r)) + [1] * len(r) for r in rows]
    return torch.tensor(input_ids, device=device), torch.tensor(mask, device=device), [len(r) for r in rows], list(cuts)


def yes_no_logits(net, input_ids, attention_mask, yes: int, no: int):
    """batch x 2 logits [no, yes] of the next token after each prompt."""
    import torch

    # logits of the last position only: all positions would be batch x length x vocab floats (GBs)
    logits = net(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=1).logits[:, -1, :]
    return torch.stack([logits[:, no], logits[:, yes]], dim=1).float()


def yes_log_odds(pair):
    """log P(yes) - log P(no) from [no, yes] logits: the relevance logit training works on."""
    return pair[:, 1] - pair[:, 0]


def yes_probabilities(pair):
    """P(yes) of each row of [no, yes] logits: their softmax (Qwen3-Reranker)."""
    import torch

    return torch.softmax(pair, dim=1)[:, 1]


def yes_probability(yes_logprob: float, no_logprob: float) -> float:
    """P(yes) / (P(yes) + P(no)) from two logprobs, computed stably."""
    top = max(yes_logprob, no_logprob)
    y, n = math.exp(yes_logprob - top), math.exp(no_logprob - top)
    return y / (y + n)


def unlisted_logprob(listed) -> float:
    """The logprob a label missing from the listed logprobs counts as: it ranks below every listed token, so -10
    (Qwen3-Reranker) or the lowest listed logprob when that is lower. A missing label never outranks a listed one."""
    return min([MISSING_LOGPROB, *listed])
