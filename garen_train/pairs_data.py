"""The LightningDataModule of the scorer jobs: mined (query, text, label) pairs, split by query.

- Data: ``path`` is one pairs file of a ``garen-train mine`` folder (``groups.jsonl`` for a navigator,
  ``documents.jsonl`` for a pointwise reranker), read through ``garen_train.mining`` (manifest and digests
  checked; a folder mined with ``--evaluation`` never trains). The line format is in ``mining/folder.py``.
- Split: the queries of ``path`` are shuffled with ``seed`` and ``val_fraction`` of them validate (no query is in
  both); or ``val_path`` names the same file of a second mined folder (e.g. the test split mined with
  ``--evaluation``) that validates while every query of ``path`` trains, and the eval guard refuses shared queries.
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
from dataclasses import dataclass
from pathlib import Path

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from garen_infer.errors import GarenError
from garen_train.mining.folder import DOCUMENTS, GROUPS, MinedPairs, check_training_data, read_mined


@dataclass(frozen=True)
class Pair:
    qid: str
    query: str
    item: str
    text: str
    label: int
    kind: str = "document"
    provenance: str = ""
    rank: int | None = None  # first-stage rank (documents), for the first-stage baseline of validation
    iteration: int | None = None  # GAREN iteration that scored the group (groups; None: never scored)


@dataclass(frozen=True)
class QueryPairs:
    """Everything mined for one query."""

    qid: str
    query: str
    pairs: tuple[Pair, ...]

    @property
    def positives(self) -> list[Pair]:
        return [p for p in self.pairs if p.label]

    @property
    def negatives(self) -> list[Pair]:
        return [p for p in self.pairs if not p.label]


def by_query(lines: list[dict]) -> list[QueryPairs]:
    """Mined lines grouped by query (queries and pairs in file order)."""
    grouped: dict[str, tuple[str, list[Pair]]] = {}
    for line in lines:
        pair = Pair(line["qid"], line["query"], line["item"], line["text"], int(line["label"]),
                    line.get("kind", "document"),
                    line.get("provenance") or "", line.get("rank"), line.get("iteration"))
        grouped.setdefault(pair.qid, (pair.query, []))[1].append(pair)
    return [QueryPairs(qid, query, tuple(pairs)) for qid, (query, pairs) in grouped.items()]


def read_pairs_file(path: str | Path, purpose: str | None = None) -> tuple[MinedPairs, list[dict]]:
    """The mined folder of a pairs file and that file's lines (``purpose="training"`` refuses evaluation data)."""
    path = Path(path)
    if path.name not in (GROUPS, DOCUMENTS):
        raise GarenError(f"{path}: name {GROUPS} or {DOCUMENTS} of a 'garen-train mine' folder")
    mined = read_mined(path.parent, purpose)
    return mined, mined.groups if path.name == GROUPS else mined.documents


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
    """Every pair of the validation queries; a pair's group is its query. An item is (a one-pair list as
    ``collate`` reads it, the pair's index), so distributed validation can drop the sampler's padding."""

    def __init__(self, queries: list[QueryPairs]):
        self.items = [(p, number) for number, q in enumerate(queries) for p in q.pairs]

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> tuple[list[tuple[Pair, int]], int]:
        return [self.items[index]], index


class EpochSampler(DistributedSampler):
    """DistributedSampler that also hands the epoch to the dataset (indices become (index, epoch))."""

    def __iter__(self):
        return ((index, self.epoch) for index in super().__iter__())


def collate(examples) -> dict:
    """Flatten lists into one batch of pairs: texts, labels, the list (train) or query (validation) of each pair,
    its first-stage rank and the GAREN iteration that scored its group (-1 when none), and its position in the
    dataset (to drop the padding of distributed validation)."""
    flat = [(pair, group) for example in examples for pair, group in example]
    return {
        "queries": [p.query for p, _ in flat],
        "texts": [p.text for p, _ in flat],
        "labels": torch.tensor([float(p.label) for p, _ in flat]),
        "groups": torch.tensor([g for _, g in flat]),
        "ranks": torch.tensor([-1 if p.rank is None else p.rank for p, _ in flat]),
        "iterations": torch.tensor([-1 if p.iteration is None else p.iteration for p, _ in flat]),
    }


def collate_eval(examples) -> dict:
    batch = collate([e[0] for e in examples])
    batch["items"] = torch.tensor([e[1] for e in examples])
    return batch


class MinedPairsDataModule(pl.LightningDataModule):
    def __init__(
        self,
        path: str,  # mined/<split>/groups.jsonl (navigator) or documents.jsonl (pointwise reranker)
        val_path: str | None = None,  # the same file of another mined folder (held-out queries), else split `path`
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
        self.mined: MinedPairs | None = None

    # ---- data ---------------------------------------------------------------------------------------------------
    def _load(self, path: str, purpose: str | None = None) -> tuple[MinedPairs, list[QueryPairs]]:
        mined, lines = read_pairs_file(path, purpose)
        return mined, [self._keep(q) for q in by_query(lines)]

    def _keep(self, query: QueryPairs) -> QueryPairs:
        pairs = [p for p in query.pairs if self.hparams.include_unreached or p.provenance != "unreached_gold"]
        if self.hparams.max_negatives is not None:
            negatives = {id(p) for p in [p for p in pairs if not p.label][: self.hparams.max_negatives]}
            pairs = [p for p in pairs if p.label or id(p) in negatives]
        return QueryPairs(query.qid, query.query, tuple(pairs))

    def setup(self, stage: str | None = None) -> None:
        if self.train_queries or self.val_queries:
            return
        training = stage in (None, "fit")
        self.mined, queries = self._load(self.hparams.path, "training" if training else None)
        if self.hparams.val_path:
            val_mined, self.val_queries = self._load(self.hparams.val_path)
            check_training_data(self.mined, val_mined)  # same query id or text: validation must hold out its queries
            self.train_queries = queries
            return
        order = sorted(q.qid for q in queries)
        random.Random(self.hparams.seed).shuffle(order)
        held_out = set(order[: round(len(order) * self.hparams.val_fraction)])
        self.train_queries = [q for q in queries if q.qid not in held_out]
        self.val_queries = [q for q in queries if q.qid in held_out]

    def describe(self) -> dict:
        """What a checkpoint's export records about its data."""
        assert self.mined is not None  # read by setup, which runs first
        return {
            "path": self.hparams.path,
            "fingerprint": "sha256:" + self.mined.manifest["files"][Path(self.hparams.path).name]["sha256"],
            "val_path": self.hparams.val_path, "val_fraction": self.hparams.val_fraction, "seed": self.hparams.seed,
            "train_queries": len(self.train_queries), "val_queries": len(self.val_queries),
            "mined": {k: v for k, v in self.mined.manifest.items() if k != "files"},
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
        sampler = EpochSampler(lists, num_replicas=world, rank=rank, shuffle=True, seed=self.hparams.seed,
                               drop_last=True)
        # every batch would be dropped: fit would end with no step, no checkpoint
        if len(sampler) < self.hparams.batch_size:
            raise GarenError(f"{self.hparams.path}: {len(lists)} training lists make no full batch of data.batch_size="
                             f"{self.hparams.batch_size}" + (f" on each of {world} devices" if world > 1 else "")
                             + "; lower data.batch_size or mine more queries")
        return DataLoader(
            lists, batch_size=self.hparams.batch_size, sampler=sampler, collate_fn=collate,
            num_workers=self.hparams.num_workers, drop_last=True,
        )

    def val_dataloader(self) -> DataLoader:
        pairs = EvalPairs(self.val_queries)
        if not len(pairs):
            return DataLoader(pairs)  # no validation (val_fraction 0 and no val_path)
        world, rank = self._replicas()
        sampler: DistributedSampler = DistributedSampler(pairs, num_replicas=world, rank=rank, shuffle=False)
        return DataLoader(
            pairs, batch_size=self.hparams.eval_batch_size, sampler=sampler, collate_fn=collate_eval,
            num_workers=self.hparams.num_workers,
        )

    def test_dataloader(self) -> DataLoader:
        return self.val_dataloader()
