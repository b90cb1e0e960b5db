"""The soft-partition LightningModule: a SIGN encoder over the document embeddings, groups as prototypes, and
DMoN's objective (``objective.py``) trained in mini-batches with a memory of every document's assignment.

    h_i  = normalise(SIGN-MLP([x_i, (ÂX)_i, ..., (Â^K X)_i]))
    s_ic = softmax over c in K_i of  cos(h_i, p_c) / temperature  +  anchor * [c = init(i)]
    K_i  = {init(i)} + the two best groups of i so far + the best group of each k-NN neighbour of i
           (a row of ``candidates``: ids ascending, padded with -1 in front)

Candidate groups (K_i) keep the cost linear in the corpus: a document's row has at most k + 3 entries instead of
one per group (Leiden gives about n / 11 groups, so a dense assignment would grow as n^2), and a group none of
whose members neighbours i would only add to i's modularity penalty. The candidates are refreshed after every
epoch from the current assignments, so groups spread along the graph the way label propagation does.
``anchor`` > 0 keeps the initial partition as a prior (0: DMoN from the initial partition, free to move).

One epoch: the batches (whole initial groups, ``data.py``), each a step on the batch's exact share of the
objective; then, at the epoch's end, candidates refreshed and every document's assignment recomputed without
dropout: the exact objective of the epoch's parameters is logged (``loss`` = -``modularity`` + lambda
``collapse``; ``modularity_hard`` is that of the argmax groups) and the memory restarts from it. The checkpoint
keeps this history. A fit resumed with ``--ckpt_path`` continues from the checkpoint's parameters, optimiser
and memory, but Lightning does not save the random state, so its dropout masks (and last digits) differ from
an uninterrupted fit's.
"""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from lightning.pytorch import LightningModule
from torch import nn

from garen_train.partition.objective import dmon_loss, full_objective, hard_modularity, overlap, per_group

if TYPE_CHECKING:
    from garen_train.partition.graph import PartitionGraph


class SignEncoder(nn.Module):
    """SIGN's inception block (Frasca et al. 2020): one linear map per hop, concatenated, then an MLP."""

    def __init__(self, hops: int, in_dim: int, hidden: int, dim: int, dropout: float):
        from torch_geometric.nn import MLP

        super().__init__()
        self.hops = nn.ModuleList(nn.Linear(in_dim, hidden) for _ in range(hops + 1))
        self.head = MLP([(hops + 1) * hidden, hidden, dim], dropout=dropout, norm=None)
        self.centre = nn.BatchNorm1d(dim, affine=False)  # spreads the directions an untrained MLP packs into a cone
        self.dropout = dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = torch.cat([linear(x[:, k]) for k, linear in enumerate(self.hops)], dim=-1)
        return self.centre(self.head(F.dropout(F.relu(z), self.dropout, self.training)))


class SoftPartition(LightningModule):
    # buffers registered by _build, once the data's shape is known
    init_group: torch.Tensor  # each document's group in the initial partition
    candidates: torch.Tensor  # each document's candidate groups, padded with -1
    assignment: torch.Tensor  # each document's weights over its candidates
    initialised: torch.Tensor

    def __init__(self, hidden: int = 128, dim: int = 64, dropout: float = 0.1, temperature: float = 0.1,
                 anchor: float = 1.0,
                 collapse_weight: float = 1.0, own_candidates: int = 2, lr: float = 3e-3, weight_decay: float = 0.0,
                 eval_batch: int = 8192):
        """
        Args:
            hidden: width of the SIGN encoder's per-hop maps and MLP
            dim: size of document and group vectors
            dropout: in the encoder, during training
            temperature: softmax temperature over cosines (lower: harder assignments)
            anchor: logit bonus for a document's initial group (0: none; large: the initial partition stays primary)
            collapse_weight: lambda, the weight of DMoN's collapse regulariser (DMoN's default 1)
            own_candidates: how many of a document's current best groups stay among its candidates
            lr: Adam learning rate
            weight_decay: Adam weight decay
            eval_batch: documents per step when every assignment is recomputed
        """
        super().__init__()
        self.save_hyperparameters()
        self.encoder: SignEncoder | None = None  # built once the data's shape is known (setup or checkpoint)
        self.graph: PartitionGraph | None = None  # attached by setup or a checkpoint's load
        self.source: dict = {}  # where the graph came from (index, corpus, hops), saved in the checkpoint
        self.history: list[dict] = []  # the exact objective before training and after each epoch

    # ---- construction -------------------------------------------------------------------------------------------
    def _build(self, hops: int, in_dim: int, n_docs: int, n_groups: int, n_candidates: int = 1) -> None:
        h = self.hparams
        self.encoder = SignEncoder(hops, in_dim, h.hidden, h.dim, h.dropout)
        self.prototypes = nn.Parameter(F.normalize(torch.randn(n_groups, h.dim,
                                                               generator=torch.Generator().manual_seed(0)), dim=-1))
        self.register_buffer("init_group", torch.zeros(n_docs, dtype=torch.long))
        self.register_buffer("candidates", torch.full((n_docs, n_candidates), -1, dtype=torch.long))
        self.register_buffer("assignment", torch.zeros(n_docs, n_candidates))
        self.register_buffer("initialised", torch.tensor(False))

    def setup(self, stage: str) -> None:
        data = self.trainer.datamodule  # type: ignore[attr-defined]  # set on the trainer at run time
        data.setup(stage)
        self.attach(data.graph)
        self.source.update(graph_seconds=data.load_seconds, graph_cpu_seconds=data.load_cpu_seconds)
        if self.encoder is None:
            graph = data.graph
            self._build(graph.features.shape[1] - 1, graph.features.shape[2], graph.n, int(data.labels.max()) + 1)
            self.init_group.copy_(data.labels)

    def attach(self, graph) -> None:
        self.graph = graph
        self.source = {"index": str(graph.path), "corpus": graph.corpus, "hops": graph.features.shape[1] - 1}

    @property
    def built_encoder(self) -> SignEncoder:
        """The SIGN encoder, which setup or a checkpoint builds before any assignment is asked for."""
        if self.encoder is None:
            raise RuntimeError("the soft-partition model is used before setup() or a checkpoint built it")
        return self.encoder

    @property
    def n_groups(self) -> int:
        return len(self.prototypes)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)

    # ---- assignments --------------------------------------------------------------------------------------------
    def assign(self, nodes: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """s_i over the candidates of ``nodes`` (rows of ``self.candidates``), from their SIGN features."""
        ids = self.candidates[nodes]
        h = F.normalize(self.built_encoder(features), dim=-1)
        logits = (h.unsqueeze(1) * F.normalize(self.prototypes, dim=-1)[ids.clamp(min=0)]).sum(
            -1
        ) / self.hparams.temperature
        if self.hparams.anchor:
            logits = logits + self.hparams.anchor * (ids == self.init_group[nodes].unsqueeze(1))
        return logits.masked_fill(ids < 0, float("-inf")).softmax(dim=-1)

    def _chunks(self):
        for start in range(0, self.graph.n, self.hparams.eval_batch):
            nodes = torch.arange(start, min(start + self.hparams.eval_batch, self.graph.n), device=self.device)
            yield nodes, self.graph.features[start : start + self.hparams.eval_batch].to(self.device).float()

    @torch.no_grad()
    def assign_all(self) -> torch.Tensor:
        """Every document's assignment over its current candidates, without dropout."""
        was_training = self.training
        self.eval()
        values = torch.cat([self.assign(nodes, features) for nodes, features in self._chunks()])
        self.train(was_training)
        return values

    @torch.no_grad()
    def refresh_candidates(self) -> None:
        """K_i = {init(i)} + i's best groups so far + each neighbour's best group (unique; padded with -1)."""
        best = self.candidates.gather(1, self.assignment.argmax(dim=1, keepdim=True)).squeeze(1)
        top = self.assignment.topk(min(self.hparams.own_candidates, self.candidates.shape[1]), dim=1)
        own_ids = self.candidates.gather(1, top.indices).masked_fill(top.values <= 0, -1)
        assert self.graph is not None  # attached before any assignment
        neighbours = self.graph.neighbours.to(self.device)
        rows = torch.cat([self.init_group.unsqueeze(1), own_ids, best[neighbours]], dim=1).sort(dim=1).values
        rows[:, 1:] = rows[:, 1:].masked_fill(rows[:, 1:] == rows[:, :-1], -1)  # duplicates
        width = int((rows >= 0).sum(dim=1).max())
        # ascending, padding first (objective.overlap)
        self.candidates = rows.sort(dim=1).values[:, -width:].contiguous()

    @torch.no_grad()
    def evaluate(self, record: bool = True) -> dict:
        """Recompute every assignment, restart the memory from them, and return the exact objective (kept in
        ``history`` when ``record``)."""
        self.assignment = self.assign_all()
        assert self.graph is not None  # attached before any assignment
        self.degree = self.graph.degree.to(self.device)
        self.volume = per_group(self.candidates, self.assignment, self.degree, self.n_groups)
        self.size = per_group(self.candidates, self.assignment, None, self.n_groups)
        result = full_objective(self.graph, self.candidates, self.assignment, self.n_groups,
                                self.hparams.collapse_weight)
        if record:
            self.history.append(result)
        return result

    @torch.no_grad()
    def _initialise(self) -> None:
        """Candidates from the initial partition, each group's prototype at the mean of its members' vectors."""
        self.candidates = self.init_group.unsqueeze(1).clone()
        assert self.graph is not None  # attached before any assignment
        self.assignment = torch.ones(self.graph.n, 1, device=self.device)
        self.refresh_candidates()
        was_training = self.training
        self.eval()
        total, count = torch.zeros_like(self.prototypes), torch.zeros(self.n_groups, 1, device=self.device)
        for nodes, features in self._chunks():
            total.index_add_(0, self.init_group[nodes], F.normalize(self.built_encoder(features), dim=-1))
            count.index_add_(0, self.init_group[nodes], torch.ones(len(nodes), 1, device=self.device))
        self.train(was_training)
        # centred means: an untrained encoder maps every document into a narrow cone, whose axis says nothing
        centred = total / count.clamp(min=1) - total.sum(0) / count.sum()
        prototypes = torch.where(count > 0, centred, self.prototypes)  # an empty group keeps its random vector
        self.prototypes.copy_(F.normalize(prototypes, dim=-1))  # unit length: Adam steps then turn them by ~lr
        self.initialised.fill_(True)

    # ---- training -----------------------------------------------------------------------------------------------
    def on_train_start(self) -> None:
        resumed = bool(self.initialised)  # a resumed fit's memory is rebuilt, its history already has this point
        if not resumed:
            self._initialise()
        self.log("init_modularity", hard_modularity(self.graph, self.init_group.cpu()))  # the partition it starts from
        result = self.evaluate(record=not resumed)
        self._log_objective(result)

    def training_step(self, batch, batch_idx):
        nodes, n, groups = batch.nodes, self.graph.n, self.n_groups
        ids, remembered = self.candidates[nodes], self.assignment[nodes]
        s = self.assign(nodes, batch.features)
        inside = batch.edge_dst_local >= 0
        dst_values = torch.where(inside.unsqueeze(1), s[batch.edge_dst_local.clamp(min=0)],
                                 self.assignment[batch.edge_dst])
        edge_overlap = overlap(ids[batch.edge_src], s[batch.edge_src], self.candidates[batch.edge_dst], dst_values)
        edge_term = (batch.edge_weight * edge_overlap * torch.where(inside, 1.0, 2.0)).sum()  # outside: both directions
        degree = self.degree[nodes]
        volume = self.volume - per_group(ids, remembered, degree, groups) + per_group(ids, s, degree, groups)
        size = self.size - per_group(ids, remembered, None, groups) + per_group(ids, s, None, groups)
        out = dmon_loss(edge_term, volume, size, float(self.degree.sum()), n, self.hparams.collapse_weight)
        with torch.no_grad():  # the memory moves to the batch's new assignments (copies were taken above)
            self.assignment[nodes] = s.detach()
            self.volume, self.size = volume.detach(), size.detach()
        self.log("train/loss", out["loss"], batch_size=len(nodes))
        return out["loss"]

    def on_train_epoch_start(self) -> None:
        self._epoch_started = (time.perf_counter(), time.process_time())

    def on_train_epoch_end(self) -> None:
        self.refresh_candidates()
        self._log_objective(self.evaluate())
        wall, cpu = self._epoch_started  # the epoch's batches and its closing evaluation; CPU time counts all threads
        self.history[-1].update(seconds=round(time.perf_counter() - wall, 3),
                                cpu_seconds=round(time.process_time() - cpu, 3))

    def _log_objective(self, result: dict) -> None:
        for key, value in result.items():
            self.log(key, value, on_epoch=True, on_step=False)

    # ---- checkpoints ----------------------------------------------------------------------------------------------
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["partition"] = {**self.source, "history": self.history}

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        state = checkpoint["state_dict"]
        self.source = {k: v for k, v in checkpoint["partition"].items() if k != "history"}
        self.history = list(checkpoint["partition"].get("history", []))
        if self.encoder is None:
            self._build(self.source["hops"], state["encoder.hops.0.weight"].shape[1],
                        len(state["init_group"]), len(state["prototypes"]))
        self.candidates = torch.empty_like(state["candidates"])  # their width changes from epoch to epoch
        self.assignment = torch.empty_like(state["assignment"])

    # ---- export (garen_train.export's Exportable protocol) -------------------------------------------------------
    @classmethod
    def add_export_arguments(cls, parser: argparse.ArgumentParser) -> None:
        from garen_train.partition.export import add_arguments

        add_arguments(parser)

    def export(self, args: argparse.Namespace) -> dict:
        from garen_train.partition.export import export_groups

        return export_groups(self, args)
