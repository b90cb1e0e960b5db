"""``garen-infer index`` killed with SIGKILL inside each stage, then run again, gives byte-identical index files;
a full disk or a read-only folder ends with one line and nothing half-written. Real processes throughout: the kill
points are named in garen_infer/storage/faults.py (``GAREN_KILL_AT``), so each kill lands at the same place
every time."""

from __future__ import annotations

import errno
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from garen_infer.storage.faults import KILL_ENV

REPO = Path(__file__).resolve().parents[2]
TIMINGS = ("seconds", "partition_seconds")  # facts of the manifest that differ from build to build


def stages_importing(vectors: Path) -> dict:
    """Every cpu-default stage, small, with the embeddings imported (no model load: each process starts fast)."""
    return {
        "bm25": {}, "embeddings": {"vectors": str(vectors)}, "knn_graph": {"k": 4},
        "groups": {"max_group_size": 3, "batch_size": 1}, "proximity_graph": {},
    }


def index_command(dataset: Path, stages: dict, out: Path, preset_dir: Path) -> list[str]:
    preset = preset_dir / f"preset-{abs(hash(json.dumps(stages, sort_keys=True)))}.yaml"
    preset.write_text(yaml.safe_dump({"index": stages}))
    return [sys.executable, "-m", "garen_infer", "index", "--dataset", str(dataset), "--preset", str(preset),
            "--out", str(out)]


def run_index(command: list[str], kill_at: str | None = None, **popen) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != KILL_ENV}
    env.update(PYTHONPATH=str(REPO), TQDM_DISABLE="1")
    if kill_at:
        env[KILL_ENV] = kill_at
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, **popen)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file of an index folder by relative path; the manifest without its timings."""
    files = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            files[str(path.relative_to(folder))] = path.read_bytes()
    manifest = json.loads(files.pop("manifest.json"))
    for stage in manifest["stages"].values():
        stage.pop("built")
        for key in TIMINGS:
            stage["info"].pop(key, None)
    files["manifest.json"] = json.dumps(manifest, sort_keys=True).encode()
    return files


def assert_identical(folder: Path, reference: Path) -> None:
    got, want = snapshot(folder), snapshot(reference)
    assert sorted(got) == sorted(want)
    different = [name for name in want if got[name] != want[name]]
    assert not different, f"files differ from an uninterrupted build: {different}"


@pytest.fixture(scope="module")
def vectors(tiny_index, tmp_path_factory) -> Path:
    """The tiny corpus's MiniLM vectors, as a user would bring them (with their ids beside them)."""
    folder = tmp_path_factory.mktemp("vectors")
    shutil.copy(tiny_index.path / "embeddings.npy", folder / "minilm.npy")
    (folder / "minilm.ids.txt").write_text("\n".join(tiny_index.doc_ids) + "\n")
    return folder / "minilm.npy"


@pytest.fixture(scope="module")
def reference(beir_dir, vectors, tmp_path_factory) -> Path:
    """An uninterrupted build of every stage."""
    out = tmp_path_factory.mktemp("reference") / "index"
    done = run_index(index_command(beir_dir, stages_importing(vectors), out, out.parent))
    assert done.returncode == 0, done.stderr
    return out


SLOW = pytest.mark.slow
KILL_POINTS = [  # one inside each stage by default; the rest with -m slow
    "write:bm25",  # stage written, not yet renamed
    "write:embeddings.npy",  # imported vectors, before the rename
    "knn_graph:batch",  # inside the k-NN search
    "groups:summary-batch#3",  # between the summary batches of the groups stage
    "write:proximity_graph",  # DiskANN built, not yet renamed
    "renamed:manifest.json#5",  # groups in place and recorded, the manifest just renamed
    pytest.param("write:doc_ids.json", marks=SLOW),  # before the first manifest
    pytest.param("renamed:knn_graph", marks=SLOW),  # stage in place, manifest not yet updated
    pytest.param("write:groups", marks=SLOW),
    pytest.param("write:manifest.json#4", marks=SLOW),  # between the manifest's temporary and its rename
]


@pytest.mark.parametrize("point", KILL_POINTS)
def test_a_build_killed_inside_a_stage_resumes_to_identical_files(point, beir_dir, vectors, reference, tmp_path):
    command = index_command(beir_dir, stages_importing(vectors), tmp_path / "index", tmp_path)
    killed = run_index(command, kill_at=point)
    assert killed.returncode == -signal.SIGKILL, f"{point} was never reached: {killed.stderr[-2000:]}"
    again = run_index(command)
    assert again.returncode == 0, again.stderr
    assert_identical(tmp_path / "index", reference)


def test_embedding_killed_between_chunks_resumes_and_loses_at_most_one_chunk(
    beir_dir, tiny_dataset, tmp_path, monkeypatch
):
    """The real encoder, four documents a chunk: killed after the second chunk, the rerun encodes the third only
    and writes the same bytes as a build that was never interrupted. (The killed build is a real process; the
    rerun and the uninterrupted build run here, where the model is loaded already.)"""
    from garen_infer.index.folder import IndexFolder
    from garen_infer.index.stages import IndexConfig
    from garen_infer.llm.embeddings import Embedder

    stages = {"embeddings": {"chunk_size": 4}}
    killed = run_index(index_command(beir_dir, stages, tmp_path / "index", tmp_path), kill_at="embeddings:chunk#2")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    partial = sorted((tmp_path / "index").glob(".embeddings.*.partial/*.npy"))
    # the kill came before the third chunk; each file's name ends in the digest of its bytes
    assert [p.name.rsplit("-", 1)[0] for p in partial] == ["rows-000000000-000000004", "rows-000000004-000000004"]
    encoded = []
    encode = Embedder.encode_documents
    monkeypatch.setattr(Embedder, "encode_documents", lambda self, texts,
                        **kw: encoded.append(len(texts)) or encode(self, texts, **kw))
    IndexFolder.build(tiny_dataset, tmp_path / "index", IndexConfig.from_dict(stages), log=lambda *_: None)
    assert encoded == [4]  # the saved chunks are reused: only the lost one is encoded again
    IndexFolder.build(tiny_dataset, tmp_path / "whole", IndexConfig.from_dict(stages), log=lambda *_: None)
    assert_identical(tmp_path / "index", tmp_path / "whole")
    assert not list((tmp_path / "index").glob(".embeddings.*"))


# ---- a full disk, a read-only folder -------------------------------------------------------------------------------
def _limit_file_size(limit: int):
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def assert_nothing_half_written(folder: Path) -> None:
    """No temporaries left, and every stage the manifest claims is there in full (it loads)."""
    from garen_infer.index.folder import IndexFolder

    assert not [p for p in folder.rglob("*") if ".tmp-" in p.name]
    if (folder / "manifest.json").exists():
        index = IndexFolder.open(folder)
        for stage in index.manifest["stages"]:
            getattr(index, stage) if stage != "groups" else index.groups()


@pytest.mark.parametrize("limit", [pytest.param(4_000, marks=SLOW), 40_000])  # 40 KB: DiskANN's own write fails
def test_writes_that_fail_end_with_one_line_and_resume(limit, beir_dir, vectors, reference, tmp_path):
    """Every write past ``limit`` bytes fails in the kernel (RLIMIT_FSIZE, errno EFBIG): what a full disk does to
    whichever write comes next, for any writer (numpy, faiss, DiskANN, JSON)."""
    command = index_command(beir_dir, stages_importing(vectors), tmp_path / "index", tmp_path)
    failed = run_index(command, preexec_fn=_limit_file_size(limit))
    assert failed.returncode == 2, failed.stderr[-3000:]
    line = failed.stderr.strip().splitlines()[-1]
    assert (
        line.startswith("garen-infer index: error: ")
        and "File too large" in line
        and "nothing half-written" in line
    ), failed.stderr
    assert "Traceback" not in failed.stderr
    assert_nothing_half_written(tmp_path / "index")
    again = run_index(command)
    assert again.returncode == 0, again.stderr
    assert_identical(tmp_path / "index", reference)


def _in_a_mount_namespace(script: str) -> subprocess.CompletedProcess | None:
    """Run ``script`` with sh in a private user + mount namespace (no root needed where the kernel allows
    unprivileged user namespaces); None where that is not possible here."""
    if shutil.which("unshare") is None:
        return None
    probe = subprocess.run(["unshare", "-Urm", "sh", "-c",
                            "mount -t tmpfs -o size=64k tmpfs /mnt 2>/dev/null || mount -t tmpfs -o size=64k "
                            "tmpfs /tmp"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return None
    env = {k: v for k, v in os.environ.items() if k != KILL_ENV}
    env.update(PYTHONPATH=str(REPO), TQDM_DISABLE="1")
    return subprocess.run(["unshare", "-Urm", "sh", "-c", script], capture_output=True, text=True, env=env, timeout=300)


def _fill_then_grow(
    command: list[str], mount: Path, size: str, between: str, after: str
) -> subprocess.CompletedProcess | None:
    """``command`` with ``mount`` a tmpfs of ``size``, then ``between`` (shell); then the tmpfs grows to 64 MiB and
    ``command`` runs again, then ``after``. None where no private mount namespace is possible."""
    mount.mkdir()
    quoted = " ".join(f"'{part}'" for part in command)
    return _in_a_mount_namespace(f"mount -t tmpfs -o size={size} tmpfs '{mount}' && {quoted}; echo \"rc=$?\" "
                                 f">&2; {between}; mount -o remount,size=64m '{mount}' && {quoted} && {after}")


def test_a_full_tmpfs_ends_with_one_line_and_resumes_when_there_is_room(beir_dir, vectors, reference, tmp_path):
    """A real ENOSPC: the index folder on a 96 KiB tmpfs; then the tmpfs grows and the same command finishes."""
    mount = tmp_path / "disk"
    check = (
        f"'{sys.executable}' -c 'import sys; sys.path.insert(0, \"{REPO}\"); sys.path.insert(0, "
        f'"{REPO / "tests" / "index"}"); '
        "from test_index_faults import assert_nothing_half_written as a; from pathlib import Path; "
        f'a(Path("{mount / "index"}"))\''
    )
    done = _fill_then_grow(index_command(beir_dir, stages_importing(vectors), mount / "index", tmp_path), mount, "96k",
                           f"{check} && echo checked >&2", f"cp -r '{mount / 'index'}' '{tmp_path / 'finished'}'")
    if done is None:
        pytest.skip("no private mount namespace here (unshare -Urm and tmpfs): the RLIMIT_FSIZE test covers this")
    lines = done.stderr.splitlines()
    error = next(line for line in lines if line.startswith("garen-infer index: error: "))
    assert "No space left on device" in error and "free some space" in error, done.stderr
    assert "rc=2" in lines and "checked" in lines, done.stderr
    assert done.returncode == 0, done.stderr
    assert_identical(tmp_path / "finished", reference)


@pytest.mark.parametrize("stage, size", [
    ("imported", "24k"),  # doc_ids.json, the manifest and the first and last page of the 18 KB of vectors fit
    pytest.param("encoded", "44k", marks=SLOW),  # the same after three encoded chunks (loads the model: 30 s)
])
def test_a_disk_that_fills_while_embeddings_are_written_ends_with_one_line(stage, size, beir_dir, vectors, tmp_path):
    """``embeddings.npy`` is written through a memory map, whose writes end the process with SIGBUS on a full disk
    (exit 135, no message); its blocks are allocated first, so a full disk gives the same line as anywhere else,
    nothing half-written, and once there is room the same command finishes (the encoded chunks kept)."""
    mount = tmp_path / "disk"
    stages = {"embeddings": {"vectors": str(vectors)}} if stage == "imported" else {"embeddings": {"chunk_size": 4}}
    done = _fill_then_grow(index_command(beir_dir, stages, mount / "index", tmp_path), mount, size,
                           f"ls -a '{mount / 'index'}' >&2", f"cp -r '{mount / 'index'}' '{tmp_path / 'finished'}'")
    if done is None:
        pytest.skip("no private mount namespace here (unshare -Urm and tmpfs)")
    lines = done.stderr.splitlines()
    assert "rc=2" in lines, done.stderr  # not 135 (SIGBUS)
    error = next(line for line in lines if line.startswith("garen-infer index: error: "))
    assert error == (
        f"garen-infer index: error: {mount / 'index' / 'embeddings.npy'}: No space left on device; outputs are "
        "written under a temporary name and renamed when complete, so nothing half-written was "
        "kept: free some space and run the same command again"
    ), done.stderr
    listing = lines[lines.index("rc=2") + 1:]
    assert "embeddings.npy" not in listing and not [name for name in listing if ".tmp-" in name], done.stderr
    assert done.returncode == 0, done.stderr
    finished = np.load(tmp_path / "finished" / "embeddings.npy")
    assert finished.shape == (12, 384) and np.allclose(np.linalg.norm(finished, axis=1), 1.0, atol=1e-5)
    if stage == "imported":
        assert np.array_equal(finished, np.load(vectors))


def test_a_read_only_folder_is_refused_in_one_line(beir_dir, vectors, tmp_path):
    mount = tmp_path / "ro"
    mount.mkdir()
    command = " ".join(f"'{part}'" for part in index_command(beir_dir, stages_importing(vectors),
                                                             mount / "index", tmp_path))
    done = _in_a_mount_namespace(f"mount -t tmpfs -o ro tmpfs '{mount}' && {command}")
    if done is None:
        pytest.skip("no private mount namespace here (unshare -Urm and tmpfs)")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (f"garen-infer index: error: {mount / 'index'}: Read-only file system; "
                                   "outputs are written under a temporary name and renamed when complete, so nothing "
                                   "half-written was kept: choose a writable folder and run the same command again")


def test_a_failed_atomic_write_keeps_the_old_file_and_names_it(tmp_path, monkeypatch):
    from garen_infer.storage.atomic import save_array

    target = tmp_path / "embeddings.npy"
    save_array(target, np.ones((2, 2), dtype=np.float32))
    before = target.read_bytes()

    def full_disk(handle, array):
        handle.write(b"\x93NUMPY half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "save", full_disk)
    with pytest.raises(OSError) as failed:
        save_array(target, np.zeros((2, 2), dtype=np.float32))
    assert failed.value.filename == str(target)
    assert target.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["embeddings.npy"]
