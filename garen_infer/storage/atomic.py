"""Writes that never leave a half-written file a later run would trust: write a temp name, then rename."""

from __future__ import annotations

import errno
import glob
import json
import os
import shutil
import socket
import tempfile
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from garen_infer.storage.faults import fault_point

TEMP_MARK = ".tmp-"  # in the name of every temporary folder below; a dead writer's are swept by the next one


@contextmanager
def atomic_path(path: Path):
    """Yield a temporary sibling path; on success it replaces ``path`` (file or folder) in one rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}{TEMP_MARK}{os.getpid()}@{socket.gethostname()}.",
                                dir=path.parent)) / path.name
    try:
        yield tmp
        fault_point(f"write:{path.name}")
        if path.is_dir():  # a folder cannot be replaced in one rename: move the old one into the temporary
            os.replace(path, tmp.parent / ".replaced")  # area first, never leaving it half-deleted under its name
        os.replace(tmp, path)
        fault_point(f"renamed:{path.name}")
    except OSError as err:
        if err.filename is None:  # numpy and friends raise a bare errno: say which output it was
            err.filename = str(path)
        raise
    finally:
        shutil.rmtree(tmp.parent, ignore_errors=True)


def remove_stale_temporaries(folder: Path) -> None:
    """Remove what a writer killed mid-write left of its temporaries. Call it only under the folder's writer lock
    (``garen_infer/storage/writer_lock.py``): then no live process owns them."""
    for leftover in Path(folder).glob(f".*{TEMP_MARK}*"):
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)


def remove_dead_writers_temporaries(path: Path) -> None:
    """Remove the temporaries of ``path`` left beside it by writers killed mid-write (``kill -9``, out of memory):
    those whose process, named in the temporary's name, no longer runs on this host. For outputs written without
    a writer lock (an export's folder); a live writer's temporary and one of another host are kept."""
    path = Path(path)
    for leftover in path.parent.glob(f".{glob.escape(path.name)}{TEMP_MARK}*"):
        pid, _, rest = leftover.name.removeprefix(f".{path.name}{TEMP_MARK}").partition("@")
        if (
            leftover.is_dir()
            and pid.isdigit()
            and rest.rpartition(".")[0] == socket.gethostname()
            and not _runs(int(pid))
        ):
            shutil.rmtree(leftover, ignore_errors=True)


def _runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process
    return True


def write_json(path: Path, obj) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def write_text(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def allocated_npy(path: Path, shape: tuple[int, ...], dtype=np.float32) -> np.memmap:
    """A new ``.npy`` file of ``shape``, memory-mapped for writing, its blocks allocated on disk first: a full disk
    is an ``OSError`` (ENOSPC) here, not a SIGBUS at some later write through the map (a sparse file's pages are
    only allocated when first written, and a mapped write that cannot get one kills the process)."""
    array = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=shape)
    descriptor = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(descriptor, 0, os.fstat(descriptor).st_size)
    except OSError as err:
        if err.errno not in (errno.EOPNOTSUPP, errno.EINVAL):  # a filesystem without it: as before, best effort
            del array
            raise  # atomic_path names the output it was for
    finally:
        os.close(descriptor)
    return array


def save_array(path: Path, array: np.ndarray) -> None:
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as handle:
            np.save(handle, array)
