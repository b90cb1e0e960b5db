"""The proximity graph RGS searches (Xu & Chen, ICLR 2026, arXiv 2509.07163; the author's run_retrieval.py): a
DiskANN (Vamana) graph over the document embeddings, cosine, alpha 1.2, build list 100, out-degree by corpus
size, built with the maintained Rust bindings (PyPI ``diskannpy-rust``, imported as ``diskannpy``).

Stored under ``proximity_graph/``:
- ``ann`` and ``ann.data``: DiskANN's own graph and vectors, enough to reload the index for greedy search;
- ``offsets.npy`` (int64, n + 1) and ``neighbours.npy`` (uint32): each document's out-neighbours as CSR rows, in
  DiskANN's order;
- ``meta.json``: doc count, degree, dimension and the DiskANN start point.

diskannpy-rust builds a streaming index: it adds one frozen start point, id n, a copy of the first vector it is
given (and writes an empty slot after it). Edges into it are read as edges into that document (self-loops and
repeats dropped); its own list is not a document's and is not kept in the CSR. ``start: medoid`` (default) hands
DiskANN the medoid first, so the start point is the medoid, as in the RGS author's static build
(diskannpy.build_memory_index, whose entry point is the point nearest the centroid); ``start: first`` keeps
document 0 first, which made it a hub (every edge into the start point lands on it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import tempfile
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import numpy as np

from garen_infer.errors import GarenError
from garen_infer.index.progress import elapsed_bar
from garen_infer.index.stages import Stage, register
from garen_infer.llm.quiet import native_stdout_to_log
from garen_infer.settings import AtLeast, Count, NonNegative
from garen_infer.storage.atomic import atomic_path

if TYPE_CHECKING:
    from garen_infer.data.dataset import Dataset
    from garen_infer.index.open_index import OpenIndex


DISKANN_PREFIX = "ann"  # diskannpy's default index_prefix; the files are ann (graph) and ann.data (vectors)


@dataclass(frozen=True)
class ProximityGraphParams:
    alpha: Annotated[float, AtLeast(1.0)] = 1.2  # RGS author's code (run_retrieval.py): diskannpy build, alpha 1.2
    build_list: Count = 100  # same: l_build (complexity) 100
    degree: NonNegative = 0  # R; 0 = by corpus size as in the author's code (8 / 12 / 16 / 32)
    # one thread makes the build deterministic (diskannpy-rust, num_threads = num_tasks = 1); more threads insert
    # in another order and build another graph, so unlike other thread counts this one identifies the stage
    threads: Count = 1
    # the start point: "medoid" (the author's static build) | "first" (document 0)
    start: Literal["medoid", "first"] = "medoid"


def degree_for(doc_count: int) -> int:
    """Out-degree R by corpus size, the author's rule: > 1M -> 32, > 100k -> 16, > 10k -> 12, else 8."""
    if doc_count > 1_000_000:
        return 32
    if doc_count > 100_000:
        return 16
    if doc_count > 10_000:
        return 12
    return 8


def _diskann():
    os.environ.setdefault("RUST_LOG", "error")  # the Rust side logs every build step at INFO otherwise
    try:
        import diskannpy
    except ImportError as err:
        raise GarenError("the proximity graph needs DiskANN's Python bindings: pip install diskannpy-rust") from err
    return diskannpy


def read_diskann_graph(path: Path) -> tuple[list[np.ndarray], int, int]:
    """Parse DiskANN's in-memory graph file: ``<u64 file size><u32 max degree><u32 start><u64 frozen points>``,
    then per node ``u32 degree`` and that many ``u32`` ids. Returns (neighbour lists, start, frozen count)."""
    raw = Path(path).read_bytes()
    if len(raw) < 24:
        raise GarenError(f"{path}: too short for a DiskANN graph file")
    size, _max_degree, start, frozen = struct.unpack_from("<QIIQ", raw, 0)
    if size != len(raw):
        raise GarenError(f"{path}: header says {size} bytes, the file has {len(raw)}; rebuild the proximity graph")
    words = np.frombuffer(raw, dtype="<u4", offset=24)
    lists, pos = [], 0
    while pos < len(words):
        degree = int(words[pos])
        lists.append(words[pos + 1 : pos + 1 + degree].astype(np.uint32))
        pos += 1 + degree
    return lists, int(start), int(frozen)


def medoid(vectors: np.ndarray) -> int:
    """The vector nearest the centroid (DiskANN's entry point for a static build)."""
    return int(np.argmin(((vectors - vectors.mean(axis=0)) ** 2).sum(axis=1)))


def built_to_row(ids, start_document: int) -> np.ndarray:
    """DiskANN ids of a build whose first vector was ``start_document`` (the rest in row order) -> corpus rows."""
    ids = np.asarray(ids, dtype=np.int64)
    return np.where(ids == 0, start_document, np.where(ids <= start_document, ids - 1, ids))


def to_csr(lists: list[np.ndarray], doc_count: int, start_document: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Documents' neighbour lists as CSR, in corpus rows, with frozen points (ids >= doc_count, copies of the
    first vector built) read as that document."""
    offsets = np.zeros(doc_count + 1, dtype=np.int64)
    rows = [np.zeros(0, dtype=np.uint32)] * doc_count  # each replaced: built ids are the rows, permuted
    for built in range(doc_count):
        node = int(built_to_row([built], start_document)[0])
        ids = built_to_row([0 if i >= doc_count else int(i) for i in lists[built]], start_document).tolist()
        rows[node] = np.asarray([i for i in dict.fromkeys(ids) if i != node], dtype=np.uint32)
    for node in range(doc_count):
        offsets[node + 1] = offsets[node] + len(rows[node])
    ids = np.concatenate(rows) if rows else np.zeros(0, dtype=np.uint32)
    return offsets, ids.astype(np.uint32)


class ProximityGraph:
    """Out-neighbours per document (``of``) and greedy search on the DiskANN index (``search``)."""

    def __init__(self, folder: Path, offsets: np.ndarray, neighbours: np.ndarray, meta: dict):
        self.folder, self.offsets, self.neighbours, self.meta = Path(folder), offsets, neighbours, meta

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def degree(self) -> int:
        return int(self.meta["degree"])

    def of(self, row: int) -> list[int]:
        """Out-neighbours of a document row, in DiskANN's order."""
        return self.neighbours[self.offsets[row] : self.offsets[row + 1]].tolist()

    def degrees(self) -> np.ndarray:
        return np.diff(self.offsets)

    @cached_property
    def _index(self):
        diskannpy = _diskann()
        return diskannpy.AsyncDiskIndex(
            str(self.folder), num_threads=1, r=self.degree, l=int(self.meta["build_list"]),
            alpha=float(self.meta["alpha"]),
            graph_slack_factor=1.0, distance_metric="cosine", vector_dtype=np.float32, dimensions=int(self.meta["dim"]),
        )

    def search(self, query_vectors: np.ndarray, k: int, list_size: int = 5000) -> list[list[int]]:
        """Greedy (beam) search from DiskANN's start point with search list ``list_size``; the top k rows per query.
        k is capped at the corpus size (DiskANN pads longer answers with zeros)."""
        k = max(1, min(k, len(self)))
        queries = np.ascontiguousarray(np.atleast_2d(query_vectors), dtype=np.float32)
        found = self._index.batch_search(queries, k_value=k, l_value=max(list_size, k), num_threads=1)
        start = int(self.meta.get("start_document", 0))
        return [
            built_to_row([i for i in row if i < len(self)], start).tolist()
            for row in np.asarray(found.identifiers)
        ]

    # ---- building and storing -------------------------------------------------------------------------------
    @classmethod
    def build(cls, vectors: np.ndarray, params: ProximityGraphParams, folder: Path) -> dict:
        """Build into ``folder`` (replaced atomically) and return facts for the manifest."""
        diskannpy = _diskann()
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        n, dim = vectors.shape
        if n < 2:
            raise GarenError(f"a proximity graph needs at least 2 documents, this corpus has {n}")
        degree = params.degree or degree_for(n)
        threads = max(1, params.threads)
        if params.start not in ("medoid", "first"):
            raise GarenError(f"proximity_graph: start must be medoid or first, not '{params.start}'")
        start_document = medoid(vectors) if params.start == "medoid" else 0
        order = np.concatenate([[start_document], np.delete(np.arange(n), start_document)])  # built id -> row
        with atomic_path(folder) as tmp:
            scratch = Path(tempfile.mkdtemp(prefix=".diskann.", dir=tmp.parent))
            start = time.perf_counter()
            try:
                with elapsed_bar(f"proximity graph (DiskANN, {n} documents)"), native_stdout_to_log("DiskANN"):
                    diskannpy.build_async_index(
                        data=np.ascontiguousarray(vectors[order]), distance_metric="cosine",
                        index_directory=str(scratch), complexity=params.build_list,
                        graph_degree=degree, alpha=params.alpha, num_start_pts=1, num_threads=threads,
                        num_tasks=threads,
                        graph_slack_factor=1.0,  # 1.0 keeps every out-degree <= R
                        max_fp_vecs_per_prune=0, pq_seed=42, insert_minibatch_size=1, index_prefix=DISKANN_PREFIX,
                    )
            except Exception as err:  # the Rust side reports a failed write as a plain Exception
                found = re.search(r"\(os error (\d+)\)", str(err))
                if found is None:
                    raise
                raise OSError(int(found.group(1)), os.strerror(int(found.group(1))), str(folder)) from None
            seconds = time.perf_counter() - start
            lists, start_point, frozen = read_diskann_graph(scratch / DISKANN_PREFIX)
            # diskannpy-rust 0.49 writes one more, empty, slot after the frozen point; anything else is a surprise
            if len(lists) < n + frozen or any(len(extra) for extra in lists[n + frozen :]):
                raise GarenError(f"DiskANN wrote {len(lists)} nodes for {n} documents and {frozen} frozen points")
            offsets, ids = to_csr(lists, n, start_document)
            tmp.mkdir()
            for name in (DISKANN_PREFIX, f"{DISKANN_PREFIX}.data"):
                shutil.move(str(scratch / name), tmp / name)
            shutil.rmtree(scratch, ignore_errors=True)
            np.save(tmp / "offsets.npy", offsets)
            np.save(tmp / "neighbours.npy", ids)
            degrees = np.diff(offsets)
            meta = {
                "type": "proximity_graph", "format": "csr", "doc_count": int(n), "dim": int(dim), "degree": int(degree),
                "alpha": params.alpha, "build_list": params.build_list, "diskann_start": start_point,
                "frozen_points": frozen,
                "start_document": int(start_document),
            }
            (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
        return {
            "seconds": round(seconds, 2), "degree": int(degree), "edges": int(len(ids)),
            "degree_min": int(degrees.min()), "degree_mean": round(float(degrees.mean()), 3),
            "degree_max": int(degrees.max()),
        }

    @classmethod
    def load(cls, folder: Path) -> ProximityGraph:
        folder = Path(folder)
        meta = json.loads((folder / "meta.json").read_text())
        offsets = np.load(folder / "offsets.npy")
        neighbours = np.load(folder / "neighbours.npy")
        if len(offsets) != meta["doc_count"] + 1 or offsets[-1] != len(neighbours):
            raise GarenError(f"{folder}: the neighbour lists do not match meta.json; rebuild the proximity graph")
        return cls(folder, offsets, neighbours, meta)


def _build_proximity_graph(folder: OpenIndex, dataset: Dataset, params: ProximityGraphParams) -> dict:
    vectors = np.load(folder.path / "embeddings.npy")
    return ProximityGraph.build(vectors, params, folder.path / "proximity_graph")


register(Stage("proximity_graph", ProximityGraphParams, _build_proximity_graph, requires=("embeddings",)))
