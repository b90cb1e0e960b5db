"""One persistent response cache for every backend: a rerun of the same configuration makes no model calls.

Keyed by (backend id, model, request kind, prompt, sampling params). SQLite, so concurrent readers and writers
(threads, processes, the shards of a run) are safe and a crash never leaves a torn entry. API keys are never part
of a key or a value.

Journal: on a local disk the cache runs in WAL mode (readers never wait for a writer). WAL needs memory shared
between the processes through a ``-shm`` file, which NFS, Lustre, GPFS and other network filesystems cannot give
processes on different hosts, so on those the cache uses SQLite's rollback journal instead (``journal_mode
DELETE``), which relies only on the file locks those filesystems provide: slower (a writer makes readers wait,
each write syncs a journal), but correct from many hosts. The filesystem is read from /proc/self/mountinfo;
``GAREN_CACHE_JOURNAL=wal|delete`` decides instead. Where a filesystem's locks cannot be trusted either, give
each shard its own cache file and join them with ``garen-infer cache merge`` (``cache_merge.py``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from garen_infer.errors import GarenError, not_a_folder


def default_cache_path() -> Path:
    root = os.environ.get("GAREN_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "garen"
    return Path(root) / "responses.sqlite"


# how long a process waits for another that holds the file locked before it gives up
BUSY_TIMEOUT_S = 60.0
JOURNAL_ENV = "GAREN_CACHE_JOURNAL"
JOURNALS = ("wal", "delete")
# filesystems whose files several hosts open: no shared memory between their processes, so no WAL
NETWORK_FILESYSTEMS = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "glusterfs",
                       "cephfs", "ceph",
                       "9p", "afs", "ocfs2", "gfs2", "panfs", "wekafs", "fuse.glusterfs", "fuse.sshfs",
                       "fuse.ceph", "fuse.s3fs")


def filesystem_type(path: Path, mountinfo: str | None = None) -> str:
    """The type of the filesystem holding ``path`` (``mountinfo``: the text of /proc/self/mountinfo), or ""."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text(encoding="utf-8")
        except OSError:  # not Linux
            return ""
    target, best, kind = str(Path(path).resolve()), "", ""
    for line in mountinfo.splitlines():
        fields, sep, rest = line.partition(" - ")
        parts = fields.split()
        if not sep or len(parts) < 5:
            continue
        mount = parts[4].replace("\\040", " ")
        if (target == mount or target.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best):
            best, kind = mount, rest.split()[0] if rest.split() else ""
    return kind


def journal_for(path: Path, mountinfo: str | None = None) -> str:
    """"wal" on a local filesystem, "delete" on a network one, or what ``GAREN_CACHE_JOURNAL`` says."""
    chosen = os.environ.get(JOURNAL_ENV, "").strip().lower()
    if chosen and chosen != "auto":
        if chosen not in JOURNALS:
            from garen_infer.errors import GarenError

            raise GarenError(f"{JOURNAL_ENV}={chosen}: expected wal, delete or auto")
        return chosen
    return "delete" if filesystem_type(path.parent, mountinfo) in NETWORK_FILESYSTEMS else "wal"


def cache_key(*parts) -> str:
    payload = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class ResponseCache:
    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else default_cache_path()
        if self.path.is_dir():
            raise GarenError(f"--cache {self.path}: a folder; name the cache file, e.g. "
                             f"{self.path / 'responses.sqlite'}")
        self._lock = threading.Lock()
        with self._failures("open"):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=BUSY_TIMEOUT_S)
            self.journal = journal_for(self.path)
            self._switch_journal()
            self._db.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            self._db.commit()

    def _switch_journal(self) -> None:
        """SQLite's busy timeout does not cover this switch: it reads the file's header in a read transaction, then
        needs the write lock, and a transaction that has read never waits for a writer (two such would wait for each
        other). So a process that opens a new cache file while another switches it gets "database is locked" at once,
        which several shards starting together meet. The failed statement holds no lock afterwards: try it again
        until the busy timeout is spent."""
        deadline, pause = time.monotonic() + BUSY_TIMEOUT_S, 0.001
        while True:
            try:
                self._db.execute(f"PRAGMA journal_mode={self.journal.upper()}")
                return
            except sqlite3.OperationalError as err:
                if not _busy(err) or time.monotonic() + pause > deadline:
                    raise
            time.sleep(pause)
            pause = min(2 * pause, 0.1)

    def get_many(self, keys: list[str]) -> dict[str, dict]:
        found = {}
        with self._lock, self._failures("read"):
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for key, value in self._db.execute(f"SELECT key, value FROM responses WHERE key IN ({marks})", chunk):
                    found[key] = json.loads(value)
        return found

    def put_many(self, items: dict[str, dict]) -> None:
        with self._lock, self._failures("write"):
            self._db.executemany("INSERT OR REPLACE INTO responses VALUES (?, ?)",
                                 [(k, json.dumps(v)) for k, v in items.items()])
            self._db.commit()

    def __len__(self) -> int:
        with self._lock, self._failures("read"):
            return self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    @contextmanager
    def _failures(self, doing: str):
        """SQLite's errors (a damaged file, a full disk) as one line naming the cache file. A transaction that
        failed is rolled back by SQLite: no answer is ever half-stored."""
        try:
            yield
        except (sqlite3.DatabaseError, OSError) as err:
            if "not a database" in str(err) or "malformed" in str(err):
                advice = "it holds only cached model answers: move it away (or pass another --cache) and run again"
            elif isinstance(err, OSError) and not_a_folder(err):
                advice = f"{not_a_folder(err)} (or pass another --cache, or --no-cache)"
            elif isinstance(err, sqlite3.OperationalError) and _busy(err):
                advice = (f"another process has held it locked for over {BUSY_TIMEOUT_S:g} s: let it finish "
                          "(or pass another --cache, or --no-cache) and run the same command again")
            else:
                advice = (
                    "free some space or fix the permissions (or pass another --cache, or --no-cache) and "
                    "run the same command again"
                )
            raise GarenError(f"response cache {self.path}: cannot {doing} it ({err}); {advice}") from None


def _busy(err: sqlite3.OperationalError) -> bool:
    """Whether SQLite refused because another connection holds a lock (SQLITE_BUSY and its extended codes)."""
    return getattr(err, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_BUSY


class NoCache:
    """Stands in when caching is switched off (``--no-cache``)."""

    def get_many(self, keys):
        return {}

    def put_many(self, items):
        pass
