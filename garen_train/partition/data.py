"""The soft-partition job's data: an index folder's graph and SIGN features, served in ClusterGCN-style batches.

A batch is a random set of whole blocks (ClusterGCN's stochastic multiple partitions, Chiang et al. 2019), the
blocks being the initial groups (Leiden's by default): most of a document's edges then stay inside its batch, so
both ends of those edges get fresh assignments, and the memory serves only the rest. torch-geometric's own
ClusterData needs METIS (pyg-lib or torch-sparse, not installed); the Leiden groups are a better-aligned
partition for this objective anyway, and they are already on disk.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from lightning.pytorch import LightningDataModule
from torch.utils.data import DataLoader, IterableDataset

from garen_train.partition.graph import PartitionGraph, init_labels


@dataclass
class NodeBatch:
    nodes: torch.Tensor  # (B,) corpus rows
    features: torch.Tensor  # (B, K + 1, dim) float32
    edge_src: torch.Tensor  # (E,) the edge's source, as a position in ``nodes``
    edge_dst: torch.Tensor  # (E,) the edge's target, a corpus row
    edge_dst_local: torch.Tensor  # (E,) the target's position in ``nodes``, or -1 outside the batch
    edge_weight: torch.Tensor  # (E,)


def node_batch(graph: PartitionGraph, nodes: torch.Tensor) -> NodeBatch:
    assert graph.features is not None  # loaded with hops
    positions, local = graph.incident(nodes)
    dst = graph.dst[positions]
    where = torch.full((graph.n,), -1, dtype=torch.long)
    where[nodes] = torch.arange(len(nodes))
    return NodeBatch(nodes, graph.features[nodes].float(), local, dst, where[dst], graph.weight[positions])


class BlockBatches(IterableDataset):
    """Whole blocks in a seeded random order per epoch, packed into batches of at least ``batch_nodes`` rows."""

    def __init__(self, graph: PartitionGraph, blocks: list[np.ndarray], batch_nodes: int, seed: int,
                 epoch: Callable[[], int]):
        self.graph, self.blocks, self.batch_nodes, self.seed, self.epoch = graph, blocks, batch_nodes, seed, epoch

    def batches(self, epoch: int) -> list[np.ndarray]:
        order = np.random.default_rng([self.seed, epoch]).permutation(len(self.blocks))
        out, current, size = [], [], 0
        for b in order:
            current.append(self.blocks[b])
            size += len(self.blocks[b])
            if size >= self.batch_nodes:
                out.append(np.concatenate(current))
                current, size = [], 0
        if current:
            out.append(np.concatenate(current))
        return out

    def __iter__(self):
        for rows in self.batches(self.epoch()):
            yield node_batch(self.graph, torch.from_numpy(rows))

    def __len__(self) -> int:
        return len(self.batches(self.epoch()))


class PartitionData(LightningDataModule):
    def __init__(self, index: str, hops: int = 2, init: str = "groups", init_stage: str = "groups",
                 n_groups: int | None = None,
                 batch_nodes: int = 2048, seed: int = 42):
        """
        Args:
            index: an index folder with the embeddings and knn_graph stages (and the groups stage for init 'groups')
            hops: K, the SIGN hops the encoder sees ([X, ÂX, ..., Â^K X]); 2 matches a 2-layer GCN's receptive field
            init: where training starts: 'groups' (a groups stage, Leiden by default), 'kmeans' or 'random'
            init_stage: the groups stage read by init 'groups'
            n_groups: number of groups for kmeans/random (default: as many as the 'groups' stage, App. C.2)
            batch_nodes: documents per batch (whole blocks are added until a batch reaches it)
            seed: batch order
        """
        super().__init__()
        self.save_hyperparameters()
        self.graph: PartitionGraph | None = None
        self.labels: torch.Tensor | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.graph is None:
            h, start, cpu = self.hparams, time.perf_counter(), time.process_time()
            self.graph = PartitionGraph.load(h.index, h.hops)
            self.labels = torch.from_numpy(init_labels(self.graph.path, h.init, h.init_stage, h.n_groups, h.seed))
            # graph, SIGN features, initial partition: wall and CPU seconds (CPU counts all threads)
            self.load_seconds, self.load_cpu_seconds = (
                round(time.perf_counter() - start, 3),
                round(time.process_time() - cpu, 3),
            )

    def blocks(self) -> list[np.ndarray]:
        assert self.labels is not None  # set by setup
        order = np.argsort(self.labels.numpy(), kind="stable")
        return np.split(order, np.cumsum(np.bincount(self.labels.numpy()))[:-1])

    def train_dataloader(self) -> DataLoader:
        def epoch() -> int:  # read at each epoch's start, so a resumed run replays the same order
            return self.trainer.current_epoch if self.trainer is not None else 0

        blocks = [b for b in self.blocks() if len(b)]
        assert self.graph is not None  # set by setup
        return DataLoader(
            BlockBatches(self.graph, blocks, self.hparams.batch_nodes, self.hparams.seed, epoch),
            batch_size=None,
        )
