"""Cross-encoders: a sequence-classification head on an encoder reads "[CLS] query [SEP] text [SEP]" and gives
one relevance logit; P(relevant) = sigmoid(logit). A folder that ``AutoModelForSequenceClassification`` and
``AutoTokenizer`` load (what ``garen-train export`` writes for the cross-encoder family, or any
sentence-transformers CrossEncoder folder).

Scoring is split into the steps garen_train trains through, so an export scores exactly as it was trained:

    encode_pairs(tokenizer, pairs, max_length)   query and text as one pair, the longer side cut first
    relevance_logits(net, batch)                 one logit per pair (differentiable)
    relevance_probability(logits)                sigmoid

A one-label head's logit is used as is; a two-label head (e.g. [irrelevant, relevant]) gives
logit(relevant) - logit(irrelevant), whose sigmoid is the head's own softmax probability.

The backend only scores (query, text) pairs (``score_pairs``): it serves yes/no scorer roles (GAREN's
navigator) and the pointwise reranker, never generation.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass

from garen_infer.errors import GarenError
from garen_infer.llm.exported_models import read_manifest, weights_tag
from garen_infer.llm.packaged_models import resolve
from garen_infer.llm.types import Chat, Completion, SamplingParams
from garen_infer.settings import execution_only


def encode_pairs(tokenizer, pairs: list[tuple[str, str]], max_length: int, device="cpu"):
    """Tokenised (query, text) pairs, padded to the longest; an over-long pair loses the end of its longer side."""
    return tokenizer(
        [q for q, _ in pairs], [t for _, t in pairs], padding=True, truncation="longest_first",
        max_length=max_length, return_tensors="pt",
    ).to(device)


def relevance_logits(net, batch):
    """One relevance logit per pair (log-odds of relevant)."""
    logits = net(**batch).logits.float()
    if logits.shape[-1] == 1:
        return logits[:, 0]
    if logits.shape[-1] == 2:
        return logits[:, 1] - logits[:, 0]
    raise GarenError(f"a cross-encoder needs a 1- or 2-label head, this one has {logits.shape[-1]} labels")


def relevance_probability(logits):
    import torch

    return torch.sigmoid(logits)


@dataclass
class CrossEncoderBackend:
    model: str  # a folder (or hub id) loadable by AutoModelForSequenceClassification
    device: str = execution_only("auto")  # "auto" = cuda when available
    dtype: str = "float32"
    batch_size: int = execution_only(32)
    # tokens of query + text; None = the length an export was trained with (its manifest), else the model's
    # own limit (at most 512)
    max_length: int | None = None

    def __post_init__(self):
        import torch
        from transformers import AutoConfig, AutoTokenizer

        self._torch = torch
        if self.device == "auto":
            self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self._path, _ = resolve(self.model)
        # the tokenizer and configuration load now, so a wrong folder is refused at once; the weights load on the
        # first pair the response cache cannot answer, so a replay from the cache loads no model
        with self._loading_errors():
            self.tokenizer = AutoTokenizer.from_pretrained(self._path)
            AutoConfig.from_pretrained(self._path)
        self._net = None
        self._loading = threading.Lock()
        if self.max_length is None:
            trained = (read_manifest(self._path) or {}).get("max_length")
            self.max_length = int(trained or min(self.tokenizer.model_max_length, 512))
        self.id = self._identity()

    def _identity(self) -> str:
        return f"cross-encoder:{self.model}{weights_tag(self.model)}:max{self.max_length}"

    @property
    def net(self):
        """The model on ``device``, loaded the first time a pair needs it."""
        from transformers import AutoModelForSequenceClassification

        with self._loading:
            if self._net is None:
                with self._loading_errors():
                    net = AutoModelForSequenceClassification.from_pretrained(
                        self._path, dtype=getattr(self._torch, self.dtype)
                    )
                # the id keys every answer already taken from the cache: the weights loaded must be the ones it names
                if self._identity() != self.id:
                    raise GarenError(f"cross-encoder backend: the model loaded is not the one its id {self.id} names "
                                     "(its files changed during the run?); start the run again")
                self._net = net.to(self.device).eval()
        return self._net

    @contextmanager
    def _loading_errors(self):
        try:
            yield
        except (OSError, ValueError) as err:
            raise GarenError(f"cross-encoder backend: cannot load '{self.model}' as a sequence classifier "
                             f"({err})") from err

    def score_pairs(self, pairs: list[tuple[str, str]]) -> list[Completion]:
        assert self.max_length is not None  # set in __post_init__
        out: list[Completion] = []
        for start in range(0, len(pairs), self.batch_size):
            chunk = pairs[start : start + self.batch_size]
            batch = encode_pairs(self.tokenizer, chunk, self.max_length, self.device)
            with self._torch.inference_mode():
                scores = relevance_probability(relevance_logits(self.net, batch)).tolist()
            lengths = batch["attention_mask"].sum(dim=1).tolist()
            out.extend(Completion(score=p, input_tokens=int(n)) for p, n in zip(scores, lengths))
        return out

    def generate(self, chats: list[Chat], params: SamplingParams) -> list[Completion]:
        raise GarenError(f"{self.id} is a cross-encoder: it scores (query, text) pairs and cannot generate text")

    def score_yes_no(self, chats: list[Chat], assistant_prefix: str) -> list[Completion]:
        raise GarenError(f"{self.id} is a cross-encoder: it scores (query, text) pairs, not chats")
