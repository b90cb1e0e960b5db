"""The response cache shared by processes: several writers at once in either journal mode, the rollback journal
chosen on network filesystems, and ``garen-infer cache merge`` for caches kept one per shard."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading

import pytest
from conftest import REPO

from garen_infer.doors.cli import main
from garen_infer.errors import GarenError
from garen_infer.llm import cache as cache_module
from garen_infer.llm.cache import ResponseCache, filesystem_type, journal_for

WRITER = """
import sys
from garen_infer.llm.cache import ResponseCache
path, me = sys.argv[1], sys.argv[2]
cache = ResponseCache(path)
for batch in range(60):
    items = {f"{me}-{batch}-{k}": {"text": f"{me}:{batch}:{k}"} for k in range(10)}
    items[f"shared-{batch}"] = {"text": f"shared:{batch}"}  # every writer writes these keys too
    cache.put_many(items)
    assert cache.get_many(list(items)) == items
"""


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_writers_in_several_processes_never_corrupt_the_cache(journal, tmp_path):
    path = tmp_path / "responses.sqlite"
    env = {**os.environ, "GAREN_CACHE_JOURNAL": journal,
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"w{k}"], env=env,
                                stderr=subprocess.PIPE, text=True)
               for k in range(4)]
    for writer in writers:
        assert writer.wait(timeout=300) == 0, writer.stderr.read()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert db.execute("PRAGMA journal_mode").fetchone() == (journal,)
    cache = ResponseCache(path)
    assert len(cache) == 4 * 60 * 10 + 60
    assert cache.get_many(["w3-59-9", "shared-7"]) == {"w3-59-9": {"text": "w3:59:9"}, "shared-7": {"text": "shared:7"}}


MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 0:35 / /scratch rw,relatime shared:20 - nfs4 filer:/scratch rw,vers=4.2
41 40 0:36 / /scratch/local\\040disk rw,relatime shared:21 - xfs /dev/sdb1 rw
"""


def test_the_journal_follows_the_filesystem_unless_told(monkeypatch, tmp_path):
    monkeypatch.delenv("GAREN_CACHE_JOURNAL", raising=False)
    assert filesystem_type("/scratch/me/cache", MOUNTINFO) == "nfs4"
    assert filesystem_type("/scratch/local disk/cache", MOUNTINFO) == "xfs"
    assert filesystem_type("/scratchy", MOUNTINFO) == "ext4"
    # REPO is under /
    assert journal_for(REPO / "x" / "responses.sqlite", MOUNTINFO.replace("ext4", "lustre")) == "delete"
    assert journal_for(REPO / "x" / "responses.sqlite", MOUNTINFO) == "wal"
    monkeypatch.setenv("GAREN_CACHE_JOURNAL", "delete")
    cache = ResponseCache(tmp_path / "c.sqlite")
    cache.put_many({"k": {"text": "v"}})
    assert cache.journal == "delete" and not (tmp_path / "c.sqlite-wal").exists()
    monkeypatch.setenv("GAREN_CACHE_JOURNAL", "mmap")
    with pytest.raises(GarenError, match="GAREN_CACHE_JOURNAL=mmap: expected wal, delete or auto"):
        ResponseCache(tmp_path / "d.sqlite")


def test_per_shard_caches_are_merged_into_one(tmp_path, capsys):
    one, two = ResponseCache(tmp_path / "1.sqlite"), ResponseCache(tmp_path / "2.sqlite")
    one.put_many({"a": {"text": "A"}, "both": {"text": "same"}, "sampled": {"text": "first"}})
    two.put_many({"b": {"text": "B"}, "both": {"text": "same"}, "sampled": {"text": "second"}})
    out = tmp_path / "all.sqlite"
    assert main(["cache", "merge", str(tmp_path / "1.sqlite"), str(tmp_path / "2.sqlite"), "--out", str(out)]) == 0
    assert "4 answers added, 1 already there, 1 already there with another answer" in capsys.readouterr().out
    merged = ResponseCache(out)
    assert merged.get_many(["a", "b", "both", "sampled"]) == {"a": {"text": "A"}, "b": {"text": "B"},
                                                              "both": {"text": "same"}, "sampled": {"text": "first"}}

    (tmp_path / "not.sqlite").write_text("hello")
    assert main(["cache", "merge", str(tmp_path / "not.sqlite"), "--out", str(out)]) == 2
    assert "not.sqlite: not a response cache" in capsys.readouterr().err
    assert main(["cache", "merge", str(out), "--out", str(out)]) == 2
    assert "is the --out cache itself" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["shard#1.sqlite", "why?.sqlite", "100%.sqlite"])
def test_a_cache_named_with_uri_characters_is_merged(name, tmp_path, monkeypatch, capsys):
    """'#', '?' and '%' mean something in the SQLite URI the source is opened read-only through."""
    ResponseCache(tmp_path / name).put_many({"a": {"text": "A"}})
    monkeypatch.chdir(tmp_path)
    assert main(["cache", "merge", name, "--out", "all.sqlite"]) == 0
    assert "1 answers added" in capsys.readouterr().out
    assert ResponseCache(tmp_path / "all.sqlite").get_many(["a"]) == {"a": {"text": "A"}}
    # no stray file
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(("all.sqlite", name))) == []


def _held_for(path, seconds: float) -> threading.Timer:
    """Another process's writer on ``path``: a connection holding SQLite's write lock for ``seconds``."""
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    release = threading.Timer(seconds, lambda: (other.execute("COMMIT"), other.close()))
    release.start()
    return release


def test_a_new_cache_switched_to_wal_waits_for_another_writer(tmp_path, monkeypatch):
    """The race of several processes opening a new cache at once, forced: the switch to WAL reads the file, then
    needs the write lock another connection holds; SQLite's busy timeout does not cover that step."""
    monkeypatch.setenv("GAREN_CACHE_JOURNAL", "wal")
    path = tmp_path / "responses.sqlite"
    release = _held_for(path, 0.5)
    cache = ResponseCache(path)
    release.join()
    cache.put_many({"k": {"text": "v"}})
    assert cache.journal == "wal" and sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert cache.get_many(["k"]) == {"k": {"text": "v"}}


def test_a_cache_locked_past_the_busy_timeout_is_one_line_saying_so(tmp_path, monkeypatch):
    monkeypatch.setenv("GAREN_CACHE_JOURNAL", "wal")
    monkeypatch.setattr(cache_module, "BUSY_TIMEOUT_S", 0.2)
    path = tmp_path / "responses.sqlite"
    release = _held_for(path, 2.0)
    try:
        with pytest.raises(GarenError) as refused:
            ResponseCache(path)
    finally:
        release.join()
    assert str(refused.value) == (f"response cache {path}: cannot open it (database is locked); another "
                                  "process has held it locked for over 0.2 s: let it finish (or pass another "
                                  "--cache, or --no-cache) and run the same command again")
