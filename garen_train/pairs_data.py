"""The LightningDataModule of the scorer jobs: mined (query, text, label) pairs, split by query.

- Split: the queries of ``path`` are shuffled with ``seed`` and ``val_fraction`` of them validate (no query is in
  both); or ``val_path`` names a second pairs file that validates while every query of ``path`` trains.
- Training examples are lists, one per (query, positive): the positive and up to ``list_size - 1`` of that
  query's negatives, drawn afresh each epoch (seeded by seed, epoch and list). Pointwise losses score every
  member; the listwise loss is a softmax over the list (the positive against the query's hard negatives).
- Validation scores every pair of every validation query, so per-query metrics (AUC, recall of the gold among
  the top K) see the whole candidate list (``max_negatives`` caps it, and the training pool, at each query's
  first N negatives).
- Distributed runs: every process draws the same epoch order and takes its share (DistributedSampler), so
  N processes with batch B/N see exactly the lists one process with batch B sees.
"""

from __future__ import annotations

import random

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from garen_infer.errors import GarenError
from garen_train.pairs import Pair, QueryPairs, file_fingerprint, folder_manifest, read_pairs


class TrainLists(Dataset):
    """One list per (query, positive); an index is (list number, epoch), so the draw is a pure function of both."""

    def __init__(self, queries: list[QueryPairs], list_size: int, seed: int):
        if list_size < 2:
            raise GarenError(f"list_size must be at least 2 (a positive and a negative), got {list_size}")
        self.lists = [(q, p) for q in queries if q.negatives for p in q.positives]
        self.list_size, self.seed = list_size, seed

    def __len__(self) -> int:
        return len(self.lists)

    def __getitem__(self, key) -> list[tuple[Pair, int]]:
        number, epoch = key
        query, positive = self.lists[number]
        negatives = query.negatives
        draw = random.Random(f"{self.seed}:{epoch}:{number}")
        chosen = draw.sample(negatives, min(self.list_size - 1, len(negatives)))
        return [(positive, number), *((n, number) for n in chosen)]


class EvalPairs(Dataset):
    """Every pair of the validation queries; a pair's group is its query."""

    def __init__(self, queries: list[QueryPairs]):
        self.items = [(p, number) for number, q in enumerate(queries) for p in q.pairs]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> list[tuple[Pair, int]]:
        return [self.items[index]]


class EpochSampler(DistributedSampler):
    """DistributedSampler that also hands the epoch to the dataset (indices become (index, epoch))."""

    def __iter__(self):
        return ((index, self.epoch) for index in super().__iter__())


def collate(examples) -> dict:
    """Flatten lists into one batch of pairs: texts, labels, the list (train) or query (validation) of each pair,
    its first-stage rank (-1 when none) and its position in the dataset (to drop the padding of distributed
    validation)."""
    flat = [(pair, group) for example in examples for pair, group in example]
    return {
        "queries": [p.query for p, _ in flat],
        "texts": [p.text for p, _ in flat],
        "labels": torch.tensor([float(p.label) for p, _ in flat]),
        "groups": torch.tensor([g for _, g in flat]),
        "ranks": torch.tensor([-1 if p.rank is None else p.rank for p, _ in flat]),
    }


def collate_eval(examples) -> dict:
    batch = collate([e[0] for e in examples])
    batch["items"] = torch.tensor([e[1] for e in examples])
    return batch


class IndexedEval(Dataset):
    """EvalPairs with each pair's dataset index attached."""

    def __init__(self, inner: EvalPairs):
        self.inner = inner

    def __len__(self) -> int:
        return len(self.inner)

    def __getitem__(self, index: int):
        return self.inner[index], index


def _normal(text: str) -> str:
    return " ".join(text.lower().split())


def _shared_queries(train: list[QueryPairs], held_out: list[QueryPairs]) -> list[str]:
    """Training queries that are also held-out queries, by id or by text (ignoring case and spacing)."""
    ids, texts = {q.qid for q in held_out}, {_normal(q.query) for q in held_out}
    return sorted(q.qid for q in train if q.qid in ids or _normal(q.query) in texts)


class MinedPairsDataModule(pl.LightningDataModule):
    def __init__(
        self,
        path: str,
        val_path: str | None = None,
        val_fraction: float = 0.2,
        seed: int = 0,
        list_size: int = 8,  # a positive and up to 7 negatives (Gao et al. 2021, localized contrastive estimation)
        batch_size: int = 4,  # lists per step and process
        eval_batch_size: int = 64,  # pairs per validation step
        include_unreached: bool = True,  # groups: the gold groups the traversal never scored, as positives
        max_negatives: int | None = None,  # keep each query's first N negatives (file order: first-stage rank)
        num_workers: int = 0,
    ):
        super().__init__()
        self.save_hyperparameters()
        if not 0.0 <= val_fraction < 1.0:
            raise GarenError(f"val_fraction must be in [0, 1), got {val_fraction}")
        self.train_queries: list[QueryPairs] = []
        self.val_queries: list[QueryPairs] = []

    # ---- data ---------------------------------------------------------------------------------------------------
    def _load(self, path: str) -> list[QueryPairs]:
        return [self._keep(q) for q in read_pairs(path)]

    def _keep(self, query: QueryPairs) -> QueryPairs:
        pairs = [p for p in query.pairs if self.hparams.include_unreached or p.provenance != "unreached_gold"]
        if self.hparams.max_negatives is not None:
            negatives = {id(p) for p in [p for p in pairs if not p.label][: self.hparams.max_negatives]}
            pairs = [p for p in pairs if p.label or id(p) in negatives]
        return QueryPairs(query.qid, query.query, tuple(pairs))

    def setup(self, stage: str | None = None) -> None:
        if self.train_queries or self.val_queries:
            return
        if stage in (None, "fit") and (folder_manifest(self.hparams.path) or {}).get("purpose") == "evaluation":
            raise GarenError(f"{self.hparams.path}: mined with --evaluation (held-out queries); it may validate a model, never train one")
        queries = self._load(self.hparams.path)
        if self.hparams.val_path:
            self.train_queries, self.val_queries = queries, self._load(self.hparams.val_path)
            shared = _shared_queries(self.train_queries, self.val_queries)
            if shared:
                raise GarenError(
                    f"{len(shared)} queries (e.g. {shared[0]}) are in both {self.hparams.path} and "
                    f"{self.hparams.val_path} (same id or same text): validation must hold out its queries"
                )
            return
        order = sorted(q.qid for q in queries)
        random.Random(self.hparams.seed).shuffle(order)
        held_out = set(order[: round(len(order) * self.hparams.val_fraction)])
        self.train_queries = [q for q in queries if q.qid not in held_out]
        self.val_queries = [q for q in queries if q.qid in held_out]

    def describe(self) -> dict:
        """What a checkpoint's export records about its data."""
        return {
            "path": self.hparams.path, "fingerprint": file_fingerprint(self.hparams.path),
            "val_path": self.hparams.val_path, "val_fraction": self.hparams.val_fraction, "seed": self.hparams.seed,
            "train_queries": len(self.train_queries), "val_queries": len(self.val_queries),
            "mined": folder_manifest(self.hparams.path),
        }

    # ---- loaders ------------------------------------------------------------------------------------------------
    def _replicas(self) -> tuple[int, int]:
        trainer = getattr(self, "trainer", None)
        return (trainer.world_size, trainer.global_rank) if trainer is not None else (1, 0)

    def train_dataloader(self) -> DataLoader:
        lists = TrainLists(self.train_queries, self.hparams.list_size, self.hparams.seed)
        if not len(lists):
            raise GarenError(f"{self.hparams.path}: no training query has both a positive and a negative pair")
        world, rank = self._replicas()
        sampler = EpochSampler(lists, num_replicas=world, rank=rank, shuffle=True, seed=self.hparams.seed, drop_last=True)
        return DataLoader(
            lists, batch_size=self.hparams.batch_size, sampler=sampler, collate_fn=collate,
            num_workers=self.hparams.num_workers, drop_last=True,
        )

    def val_dataloader(self) -> DataLoader:
        pairs = IndexedEval(EvalPairs(self.val_queries))
        if not len(pairs):
            return DataLoader([])  # no validation (val_fraction 0 and no val_path)
        world, rank = self._replicas()
        sampler = DistributedSampler(pairs, num_replicas=world, rank=rank, shuffle=False)
        return DataLoader(
            pairs, batch_size=self.hparams.eval_batch_size, sampler=sampler, collate_fn=collate_eval,
            num_workers=self.hparams.num_workers,
        )

    def test_dataloader(self) -> DataLoader:
        return self.val_dataloader()
