"""A run folder survives interruption: finished queries are kept in trace.jsonl and skipped when the same run
is started again; a torn last line is cut off and redone; another configuration is refused."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

import pytest

from garen_infer.errors import GarenError
from garen_infer.llm.roles import EmbeddingReranker, Roles
from garen_infer.running.runner import RunConfig
from garen_infer.running.session import execute

QIDS = ["q1", "q2", "q3", "q4"]


class ScriptedReranker:
    """The real embedding reranker, interrupted (as by Ctrl-C) on call number ``fail_on``; counts its calls."""

    name = "embedding"

    def __init__(self, index, fail_on: int | None = None):
        self.inner = EmbeddingReranker(index.embedder, index.embeddings)
        self.fail_on, self.calls, self.queries = fail_on, 0, []

    def rerank(self, jobs):
        self.calls += 1
        if self.fail_on is not None and self.calls >= self.fail_on:
            raise KeyboardInterrupt
        self.queries.extend(j.query for j in jobs)
        return self.inner.rerank(jobs)


def config(**changes) -> RunConfig:
    # one query at a time, so an interruption falls between queries deterministically
    values = dict(method="rerank", method_options={"budget": 8, "window": 4, "stride": 2}, max_active_queries=1)
    values.update(changes)
    return RunConfig.build(**values)


def trace_qids(out) -> list[str]:
    return [json.loads(line)["qid"] for line in (out / "trace.jsonl").read_text(encoding="utf-8").splitlines()]


def calls_per_query(tiny_dataset, tiny_index, tmp_path) -> dict[str, int]:
    counter = ScriptedReranker(tiny_index)
    execute(tiny_dataset, tiny_index, config(), tmp_path / "count", roles=Roles(reranker=counter), log=lambda *_: None)
    texts = {q.text: q.id for q in tiny_dataset.queries}
    counts: dict[str, int] = {}
    for text in counter.queries:
        counts[texts[text]] = counts.get(texts[text], 0) + 1
    return counts


@pytest.fixture
def uninterrupted(tiny_dataset, tiny_index, tmp_path):
    out = tmp_path / "reference"
    execute(tiny_dataset, tiny_index, config(), out, roles=Roles(reranker=ScriptedReranker(tiny_index)),
            log=lambda *_: None)
    return out


def test_resume_after_interruption(tiny_dataset, tiny_index, tmp_path, uninterrupted):
    calls = calls_per_query(tiny_dataset, tiny_index, tmp_path)
    assert all(calls[q] >= 1 for q in QIDS)
    fail_on = calls["q1"] + calls["q2"] + 1  # the first call of q3
    out = tmp_path / "run"

    interrupted = ScriptedReranker(tiny_index, fail_on=fail_on)
    with pytest.raises(GarenError) as err:
        execute(tiny_dataset, tiny_index, config(), out, roles=Roles(reranker=interrupted), log=lambda *_: None)
    assert str(err.value) == (
        f"interrupted: 2 of 4 queries are saved in {out / 'trace.jsonl'}; run the same command again to resume"
    )
    assert trace_qids(out) == ["q1", "q2"]
    assert not (out / "run.trec").exists() and not (out / "metrics.json").exists()
    assert (out / "config.json").exists()

    logs = []
    resumed = ScriptedReranker(tiny_index)
    metrics = execute(tiny_dataset, tiny_index, config(), out, roles=Roles(reranker=resumed), log=logs.append)
    assert logs == ["[run] resuming: 2 of 4 queries already finished", "[run] prompts cut to fit a model's limit: 0",
                    "[run] answers not used as asked: none"]
    assert resumed.calls == calls["q3"] + calls["q4"]  # finished queries cost nothing
    assert sorted(trace_qids(out)) == QIDS  # each query once
    assert (out / "run.trec").read_bytes() == (uninterrupted / "run.trec").read_bytes()
    reference = json.loads((uninterrupted / "metrics.json").read_text())
    assert metrics["nDCG@10"] == reference["nDCG@10"] and metrics["queries"] == 4


def test_torn_last_line_is_cut_off_and_redone(tiny_dataset, tiny_index, tmp_path, uninterrupted):
    out = tmp_path / "run"
    execute(tiny_dataset, tiny_index, config(), out, roles=Roles(reranker=ScriptedReranker(tiny_index)),
            log=lambda *_: None)
    trace = (out / "trace.jsonl").read_bytes()
    lines = trace.splitlines(keepends=True)
    last_qid = json.loads(lines[-1])["qid"]
    # the process died while writing the last record: half a line, no newline; outputs were never written
    (out / "trace.jsonl").write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    (out / "run.trec").unlink()
    (out / "metrics.json").unlink()

    again = ScriptedReranker(tiny_index)
    execute(tiny_dataset, tiny_index, config(), out, roles=Roles(reranker=again), log=lambda *_: None)
    query_text = next(q.text for q in tiny_dataset.queries if q.id == last_qid)
    assert again.queries and set(again.queries) == {query_text}  # only the torn query was redone
    assert sorted(trace_qids(out)) == QIDS
    assert all(line.endswith(b"\n") for line in (out / "trace.jsonl").read_bytes().splitlines(keepends=True))
    assert (out / "run.trec").read_bytes() == (uninterrupted / "run.trec").read_bytes()


def test_a_finished_run_is_not_recomputed(tiny_dataset, tiny_index, uninterrupted):
    before = (uninterrupted / "trace.jsonl").read_bytes()
    untouched = ScriptedReranker(tiny_index, fail_on=1)  # any model call would raise
    execute(tiny_dataset, tiny_index, config(), uninterrupted, roles=Roles(reranker=untouched), log=lambda *_: None)
    assert untouched.calls == 0
    assert (uninterrupted / "trace.jsonl").read_bytes() == before


@pytest.mark.parametrize(
    "changes, differs",
    [
        ({"budget": 6}, "budget"),
        ({"method_options": {"budget": 8, "window": 6, "stride": 3}}, "method_options"),
        ({"method": "slidegar", "method_options": {}}, "method"),
        ({"limit": 2}, "limit"),
    ],
)
def test_another_configuration_in_the_same_folder_is_refused(tiny_dataset, tiny_index, uninterrupted, changes, differs):
    before = {p.name: p.read_bytes() for p in uninterrupted.iterdir()}
    with pytest.raises(GarenError, match="holds a run with a different configuration") as err:
        execute(tiny_dataset, tiny_index, config(**changes), uninterrupted,
                roles=Roles(reranker=ScriptedReranker(tiny_index, fail_on=1)), log=lambda *_: None)
    assert f"({differs}" in str(err.value) or f", {differs}" in str(err.value)
    assert "use another --out folder" in str(err.value)
    assert {p.name: p.read_bytes() for p in uninterrupted.iterdir()} == before  # nothing was touched


def test_batching_across_queries_does_not_change_the_run(tiny_dataset, tiny_index, tmp_path, uninterrupted):
    out = tmp_path / "batched"
    reranker = ScriptedReranker(tiny_index)
    execute(tiny_dataset, tiny_index, config(max_active_queries=16), out, roles=Roles(reranker=reranker),
            log=lambda *_: None)
    assert (out / "run.trec").read_bytes() == (uninterrupted / "run.trec").read_bytes()


def test_an_index_stage_rebuilt_with_other_params_is_not_mixed_into_a_resume(
    tiny_dataset, tiny_index, uninterrupted, tmp_path
):
    import shutil

    from garen_infer.index.folder import IndexFolder
    from garen_infer.index.stages import IndexConfig

    copy = tmp_path / "index"
    shutil.copytree(tiny_index.path, copy)
    run = tmp_path / "run"
    shutil.copytree(uninterrupted, run)
    rebuilt = IndexFolder.build(tiny_dataset, copy, IndexConfig.from_dict({"bm25": {"k1": 0.9}}), log=lambda *_: None)
    saved = json.loads((run / "config.json").read_text())
    saved["index"] = str(copy)  # same folder name as the run was started with, but bm25 has changed since
    (run / "config.json").write_text(json.dumps(saved))
    with pytest.raises(GarenError, match="index_stages"):
        execute(tiny_dataset, rebuilt, config(), run,
                roles=Roles(reranker=ScriptedReranker(tiny_index, fail_on=1)), log=lambda *_: None)


class InterruptedOnThirdWindows(ScriptedReranker):
    """Served with 4 requests at once, one window each: a query's third window interrupts the run, once q2 and q3
    (two windows each) are saved, so the interruption does not depend on how the windows were grouped into calls."""

    def __init__(self, index, out):
        super().__init__(index)
        self.out, self.backend = out, type("Server", (), {"requests_at_once": 4})()
        self.windows, self.lock = Counter(), threading.Lock()

    def rerank(self, jobs):
        with self.lock:
            self.windows.update(job.query for job in jobs)
            third = any(self.windows[job.query] == 3 for job in jobs)
        if third:
            deadline = time.monotonic() + 10
            while not {"q2", "q3"} <= set(trace_qids(self.out) if (self.out / "trace.jsonl").exists() else []):
                assert time.monotonic() < deadline, "q2 and q3 were never saved"
                time.sleep(0.01)
            raise KeyboardInterrupt
        with self.lock:  # one window at a time through the index's embedder
            return super().rerank(jobs)


def test_resume_when_queries_finished_out_of_order_at_the_default_concurrency(tiny_dataset, tiny_index, tmp_path):
    """The other resume tests run one query at a time, so the finished queries are always a prefix. By default 16
    run at once and a query with fewer windows finishes first: here q2 and q3 (3 candidates each, 2 windows of 2)
    are done while q1 and q4 (4 candidates, 3 windows) are not. A resume must redo exactly the unfinished ones."""
    options = {"budget": 8, "window": 2, "stride": 1}
    default = RunConfig.build(method="rerank", method_options=options)
    assert default.max_active_queries == 16
    reference = tmp_path / "reference"
    execute(tiny_dataset, tiny_index, default, reference, roles=Roles(reranker=ScriptedReranker(tiny_index)),
            log=lambda *_: None)

    out = tmp_path / "run"
    with pytest.raises(GarenError, match="interrupted: 2 of 4 queries are saved"):
        execute(tiny_dataset, tiny_index, default, out,
                roles=Roles(reranker=InterruptedOnThirdWindows(tiny_index, out)), log=lambda *_: None)
    finished = trace_qids(out)
    assert sorted(finished) == ["q2", "q3"]  # in the order they finished; not a prefix of the query order

    resumed = ScriptedReranker(tiny_index)
    execute(tiny_dataset, tiny_index, default, out, roles=Roles(reranker=resumed), log=lambda *_: None)
    texts = {q.text: q.id for q in tiny_dataset.queries}
    assert {texts[t] for t in resumed.queries} == {"q1", "q4"}  # q2 and q3 are not redone, none is skipped
    assert sorted(trace_qids(out)) == QIDS
    assert (out / "run.trec").read_bytes() == (reference / "run.trec").read_bytes()
