"""One writer per folder: a run, index or mined folder is locked while a process writes it.

The lock is the kernel's (``flock``) on ``<folder>/.garen-writer.lock``, which the kernel drops when its holder
exits, however it exits (``kill -9`` included). So a lock left by a dead process is free at once, nothing has to
guess whether a holder is still alive, and when several processes race for a freed lock exactly one wins.
On NFS (v4, or v3 with lockd) Linux turns ``flock`` into the server's byte-range locks, so writers on other hosts
are excluded as well, and the lock of a host that crashed lapses with its lease. A filesystem without working locks
is refused with a message; ``GAREN_NO_LOCK=1`` writes without a lock where the user knows no one else writes.

The file also says who holds the lock (pid, host, start time, command): a second writer is refused at once with
those facts, and a record left behind by a holder that died is reported when the next writer takes over. An
empty file is a lock released cleanly.

The lock names the kind of folder its holder writes; a folder that another command owns (an index folder named
as a run's --out, say) is refused before the lock is taken and again once it is held
(``garen_infer/storage/folder_kinds.py``).
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import socket
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from garen_infer.errors import GarenError
from garen_infer.storage.folder_kinds import COMMANDS, LOCK_NAME, refuse_foreign

NO_LOCK_ENV = "GAREN_NO_LOCK"
_NO_LOCKS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}

log = logging.getLogger(__name__)


_held: dict[Path, int] = {}  # folder -> the thread holding its lock in this process (re-entering is allowed)


@contextmanager
def writer_lock(folder: str | Path, what: str = "folder"):
    """Hold ``folder``'s writer lock for the ``with`` block (the folder is created if need be). Raises a
    ``GarenError`` naming the holder when another process, or another thread, writes the folder; the thread that
    holds it may enter again (the CLI locks before loading data, then the run locks the same folder). ``what``,
    when it is one of ``folder_kinds``' kinds, is also the kind of folder the holder writes: another's is refused."""
    from garen_infer.storage.atomic import remove_stale_temporaries

    folder = Path(folder)
    if what in COMMANDS:
        refuse_foreign(folder, what)  # before creating anything in another command's folder
    created = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # --out naming a file, a path through one, or a dangling link
        raise GarenError(f"{folder}: cannot be the {what}: {_not_a_folder(folder)}; name a folder") from None
    key = folder.resolve()
    if os.environ.get(NO_LOCK_ENV) or _held.get(key) == threading.get_ident():
        yield
        return
    fd = _acquire(folder, what)
    try:
        if what in COMMANDS:
            refuse_foreign(folder, what)  # again under the lock: another command may have written it meanwhile
        left = _read_record(fd)
        if left:
            log.warning("%s: taking over the %s from %s, which ended without releasing it", folder, what,
                        describe_holder(left))
        remove_stale_temporaries(folder)  # only a dead writer can have left them: we hold the lock
        _write_record(fd, folder / LOCK_NAME)
        _held[key] = threading.get_ident()
        yield
    finally:
        _held.pop(key, None)
        os.ftruncate(fd, 0)
        if created and [p.name for p in folder.iterdir()] == [LOCK_NAME]:
            # refused before writing anything (a bad setting): leave no empty folder behind. Unlinked while still
            # held; a process that opened this file meanwhile sees it gone once it has the lock, and starts over
            (folder / LOCK_NAME).unlink()
            folder.rmdir()
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _not_a_folder(folder: Path) -> str:
    """Why ``folder`` cannot be created: the first part of its path that is a file or a link to nothing."""
    for part in reversed((folder, *folder.parents)):
        if part.is_symlink() and not part.exists():
            return f"{part} is a symbolic link to {os.readlink(part)}, which does not exist"
        if part.exists() and not part.is_dir():
            return f"{part} is a file, not a folder"
    return "it is not a folder"


def _acquire(folder: Path, what: str) -> int:
    """Lock ``folder``'s lock file and return its descriptor, or refuse naming the holder."""
    path = folder / LOCK_NAME
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            who = describe_holder(holder)
            if holder and _alive(holder) is False:  # the lock is held, yet its recorded holder is gone
                who += "; that pid is not running here, so a child process it started still holds the lock"
            raise GarenError(f"{folder}: another process is writing this {what}: {who}; "
                             f"wait for it to finish, or use another folder") from None
        except OSError as err:
            os.close(fd)
            if err.errno in _NO_LOCKS:
                raise GarenError(f"{folder}: cannot lock this {what} ({err.strerror}): the filesystem has no "
                                 f"working file locks; set {NO_LOCK_ENV}=1 to write without one if no other process "
                                 "writes here") from None
            raise
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)  # locked a file its last holder removed: the lock now lives in a new file
        folder.mkdir(parents=True, exist_ok=True)


def _holder(fd: int, patience: float = 1.0) -> dict:
    """The holder's record. A writer that has just won the lock writes its record a moment later: until then the
    file is empty or still holds the record of a holder that died, so look again for up to ``patience`` seconds."""
    deadline = time.monotonic() + patience
    while True:
        record = _read_record(fd)
        if (record and _alive(record) is not False) or time.monotonic() > deadline:
            return record
        time.sleep(0.05)


def describe_holder(record: dict) -> str:
    """Who the record says holds (or, once it is taken over, held) the lock."""
    if not record:
        return "a process that has not said who it is yet"
    text = f"pid {record.get('pid')} on host {record.get('host')}, started {record.get('started')}"
    if record.get("command"):
        text += f" ({record['command']})"
    return text


def _alive(record: dict) -> bool | None:
    """Whether the recorded pid runs on this host (None: another host, which cannot be asked)."""
    if record.get("host") != socket.gethostname():
        return None
    try:
        os.kill(int(record["pid"]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, KeyError, ValueError, TypeError):
        pass
    return True


def _read_record(fd: int) -> dict:
    raw = os.pread(fd, 65536, 0)
    try:
        record = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return record if isinstance(record, dict) else {}


def _write_record(fd: int, path: Path) -> None:
    record = {
        "pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:300] if sys.argv and sys.argv[0] else "",
    }
    data = json.dumps(record).encode("utf-8")
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
        os.fsync(fd)
    except OSError as err:
        err.filename = err.filename or str(path)
        raise
