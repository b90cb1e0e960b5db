"""Reading an index's files as what they claim to be. The manifest's cheap checks (presence, sizes) pass a file
damaged in place at the same size; what it then fails to parse is one line naming the file and the rebuild, never
a traceback from numpy, json or scipy."""

from __future__ import annotations

import pickle
import zipfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from garen_infer.errors import GarenError

REBUILD = "run 'garen-infer index' on it again with the preset that built it: it rebuilds what is damaged"
# what numpy, json, scipy and bm25s raise on bytes that are not the format they expect
UNPARSABLE = (ValueError, EOFError, KeyError, TypeError, IndexError, zipfile.BadZipFile, pickle.UnpicklingError)
ROWS_PER_CHECK = 1 << 16  # vectors checked for NaN a block at a time: a memory map is never read whole at once


def damaged(path: str | Path, problem: str) -> GarenError:
    return GarenError(f"{path}: damaged index file ({problem}); {REBUILD}")


@contextmanager
def reading(path: str | Path):
    """Parse failures inside the block as one ``GarenError`` naming ``path`` (a file or a stage folder)."""
    try:
        yield
    except UNPARSABLE as err:
        raise damaged(path, f"{type(err).__name__}: {err}") from None


def load_vectors(path: Path) -> np.ndarray:
    """An embedding stage's vectors (memory-mapped), refused when unreadable, not a 2-D float matrix, or holding
    NaN or infinity (a damaged block would otherwise rank at random, silently)."""
    with reading(path):
        vectors = np.load(path, mmap_mode="r", allow_pickle=False)
    if vectors.ndim != 2 or vectors.dtype.kind != "f":
        raise damaged(path, f"a {vectors.ndim}-D {vectors.dtype} array, not a matrix of vectors")
    for start in range(0, len(vectors), ROWS_PER_CHECK):
        block = vectors[start:start + ROWS_PER_CHECK]
        if not np.isfinite(block).all():
            row = start + int(np.argwhere(~np.isfinite(block))[0][0])
            raise damaged(path, f"row {row} holds NaN or infinity")
    return vectors
