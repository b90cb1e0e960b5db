"""One writer per folder, with real processes: a second writer is refused at once with the holder's pid, host and
start time; a lock left by a process killed with SIGKILL is taken over, by exactly one of several racers; the
response cache stays shareable by many writing processes at once."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from garen_infer.errors import GarenError
from garen_infer.storage.writer_lock import LOCK_NAME, writer_lock

REPO = Path(__file__).resolve().parents[2]

# A process that takes the writer lock of argv[1], says so, and holds it until its stdin closes.
HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from garen_infer.errors import GarenError
    from garen_infer.storage.writer_lock import writer_lock
    folder, go = Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None
    while go is not None and not go.exists():
        time.sleep(0.005)
    try:
        with writer_lock(folder, "run folder"):
            print("won", flush=True)
            sys.stdin.read()
    except GarenError as err:
        print("refused", err, flush=True)
""")


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def start_holder(folder: Path, go: Path | None = None) -> subprocess.Popen:
    args = [sys.executable, "-c", HOLDER, str(folder)] + ([str(go)] if go else [])
    return subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_env())


def holding(folder: Path) -> subprocess.Popen:
    holder = start_holder(folder)
    assert holder.stdout.readline().strip() == "won"
    return holder


def release(holder: subprocess.Popen) -> None:
    holder.stdin.close()
    holder.wait(timeout=30)


def test_a_second_process_is_refused_at_once_naming_the_holder(tmp_path, beir_dir):
    folder = tmp_path / "run"
    holder = holding(folder)
    try:
        start = time.monotonic()
        second = subprocess.run(
            [sys.executable, "-m", "garen_infer", "run", "--dataset", str(beir_dir), "--index",
             str(tmp_path / "no-index"),
             "--method", "bm25", "--out", str(folder)],
            capture_output=True, text=True, env=_env(), timeout=120,
        )
        # refused before the index is even opened (that would fail with another message)
        assert second.returncode == 2, second.stderr
        line = second.stderr.strip()
        assert len(line.splitlines()) == 1 and "Traceback" not in line
        assert (
            f"{folder}: another process is writing this run folder: pid {holder.pid} on host "
            f"{socket.gethostname()}, started 20"
            in line
        )
        assert time.monotonic() - start < 60  # no waiting for the holder
        assert not (folder / "config.json").exists()
    finally:
        release(holder)


def test_an_index_folder_is_locked_while_it_is_built(tmp_path, tiny_dataset, index_config):
    from garen_infer.index.folder import IndexFolder

    holder = holding(tmp_path / "index")
    try:
        with pytest.raises(GarenError, match=f"another process is writing this index folder: pid {holder.pid} "):
            IndexFolder.build(tiny_dataset, tmp_path / "index", index_config, log=lambda *_: None)
    finally:
        release(holder)
    assert not (tmp_path / "index" / "manifest.json").exists()


def test_a_lock_is_released_on_exit_and_the_record_cleared(tmp_path):
    (tmp_path / "f").mkdir()
    release(holding(tmp_path / "f"))
    assert (tmp_path / "f" / LOCK_NAME).read_text() == ""
    with writer_lock(tmp_path / "f"):  # free again
        record = json.loads((tmp_path / "f" / LOCK_NAME).read_text())
        assert record["pid"] == os.getpid() and record["host"] == socket.gethostname()


def test_two_threads_exclude_each_other_and_one_thread_may_reenter(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    def second_writer():
        with writer_lock(tmp_path / "f"):
            pass

    (tmp_path / "f").mkdir()
    with writer_lock(tmp_path / "f"):
        with writer_lock(tmp_path / "f"):  # the CLI holds it, then the run takes it again
            pass
        with ThreadPoolExecutor(1) as pool, pytest.raises(GarenError, match=f"pid {os.getpid()} on host"):
            pool.submit(second_writer).result()
    assert (tmp_path / "f" / LOCK_NAME).read_text() == ""  # released once, by the outer block


def test_a_folder_refused_before_any_write_is_not_left_behind(tmp_path):
    with pytest.raises(GarenError):
        with writer_lock(tmp_path / "new" / "run"):
            raise GarenError("a bad setting")
    assert not (tmp_path / "new" / "run").exists()


def test_a_killed_writers_lock_is_taken_over(tmp_path, caplog):
    folder = tmp_path / "run"
    holder = holding(folder)
    leftover = folder / ".config.json.tmp-abc123"  # what an atomic write killed mid-way leaves
    leftover.mkdir()
    (leftover / "config.json").write_text("{half")
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=30)
    assert json.loads((folder / LOCK_NAME).read_text())["pid"] == holder.pid  # the dead holder's record stays
    with caplog.at_level(logging.WARNING, logger="garen_infer.storage.writer_lock"), writer_lock(folder, "run folder"):
        assert json.loads((folder / LOCK_NAME).read_text())["pid"] == os.getpid()
    assert f"taking over the run folder from pid {holder.pid} on host" in caplog.text
    # was: "...; that pid is not running here, so a child process it started still holds the lock, which ended
    # without releasing it": no process holds a lock that is being taken over
    assert "which ended without releasing it" in caplog.text and "child process" not in caplog.text
    assert not leftover.exists()


def test_a_lock_a_dead_holders_child_still_holds_is_refused_saying_so(tmp_path):
    """The other side of the take-over: the recorded pid is gone, but a child it forked inherited the lock."""
    folder = tmp_path / "run"
    parent = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import os, sys, time
        from pathlib import Path
        from garen_infer.storage.writer_lock import writer_lock
        with writer_lock(Path(sys.argv[1]), "run folder"):
            child = os.fork()
            if child == 0:
                for fd in (0, 1, 2):  # let the test read the parent's output to its end
                    os.dup2(os.open(os.devnull, os.O_RDWR), fd)
                time.sleep(60)
                os._exit(0)
            print(child, flush=True)
            os._exit(0)  # the parent ends without releasing; its child keeps the lock
    """), str(folder)], capture_output=True, text=True, env=_env(), timeout=30)
    child = int(parent.stdout.strip())
    try:
        with pytest.raises(GarenError) as refused, writer_lock(folder, "run folder"):
            pass
        assert "that pid is not running here, so a child process it started still holds the lock" in str(refused.value)
    finally:
        os.kill(child, signal.SIGKILL)


def test_racers_for_a_stale_lock_leave_exactly_one_writer(tmp_path):
    folder, go = tmp_path / "run", tmp_path / "go"
    dead = holding(folder)
    os.kill(dead.pid, signal.SIGKILL)
    dead.wait(timeout=30)
    racers = [start_holder(folder, go) for _ in range(4)]
    time.sleep(1.0)  # all started and polling for the go file
    go.touch()
    first_lines = {r.pid: r.stdout.readline().strip() for r in racers}
    winners = [pid for pid, line in first_lines.items() if line == "won"]
    try:
        assert len(winners) == 1, first_lines
        for pid, line in first_lines.items():
            if pid != winners[0]:
                # the losers name the winner, never the dead holder
                assert line.startswith("refused") and f"pid {winners[0]} on host" in line, line
    finally:
        for racer in racers:
            release(racer)


def test_a_filesystem_without_locks_is_refused_with_a_way_out(tmp_path, monkeypatch):
    import errno
    import fcntl

    def no_locks(fd, op):
        if op & fcntl.LOCK_EX:
            raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.raises(GarenError, match="the filesystem has no working file locks; set GAREN_NO_LOCK=1"):
        with writer_lock(tmp_path / "f"):
            pass
    monkeypatch.setenv("GAREN_NO_LOCK", "1")
    with writer_lock(tmp_path / "f"):
        pass


# ---- the response cache: one SQLite file, many writing processes -----------------------------------------------------
CACHE_WRITER = textwrap.dedent("""
    import sys
    from garen_infer.llm.cache import ResponseCache
    path, me, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    cache = ResponseCache(path)
    for start in range(0, n, 5):
        batch = {f"w{me}-{i}": {"text": f"answer {me} {i}"} for i in range(start, start + 5)}
        batch.update({f"shared-{i}": {"text": f"shared {i}"} for i in range(start, start + 5)})  # all write these
        cache.put_many(batch)
        assert cache.get_many(list(batch)) == batch
    print("done", flush=True)
""")


def test_the_response_cache_takes_concurrent_writers(tmp_path):
    path, writers, n = tmp_path / "responses.sqlite", 4, 200
    procs = [subprocess.Popen([sys.executable, "-c", CACHE_WRITER, str(path), str(w), str(n)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=_env()) for w in range(writers)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and out.strip() == "done", err
    from garen_infer.llm.cache import ResponseCache

    cache = ResponseCache(path)
    assert len(cache) == writers * n + n
    keys = [f"w{w}-{i}" for w in range(writers) for i in range(n)] + [f"shared-{i}" for i in range(n)]
    found = cache.get_many(keys)
    assert found[f"w3-{n - 1}"] == {"text": f"answer 3 {n - 1}"} and found["shared-7"] == {"text": "shared 7"}
    assert len(found) == len(keys)
