"""The Python API as users call it: ``gi.Index`` and ``gi.Retriever`` give the rankings ``garen-infer run`` writes,
share its response cache, report per-query costs, and refuse bad input with the CLI's one line as a GarenError."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
from conftest import DOCS, QRELS, QUERIES, REPO, write_beir

import garen_infer as gi
from garen_infer.doors.cli import main


def trec_rows(path: Path) -> list[tuple[str, str, int, float]]:
    rows = []
    for line in path.read_text().splitlines():
        qid, _, docno, rank, score, _ = line.split()
        rows.append((qid, docno, int(rank), float(score)))
    return rows


def frame_rows(frame) -> list[tuple[str, str, int, float]]:
    return [
        (q, d, int(r) + 1, float(s))
        for q, d, r, s in frame[["qid", "docno", "rank", "score"]].itertuples(index=False)
    ]


@pytest.mark.parametrize("method", ["bm25", "rerank", "slidegar", "garen"])
def test_search_gives_the_rankings_of_garen_infer_run(method, tiny_dataset, tiny_index, beir_dir, request,
                                                      tmp_path, capsys):
    folder = request.getfixturevalue("full_index") if method == "garen" else tiny_index
    cache = tmp_path / "responses.sqlite"
    assert main(["run", "--dataset", str(beir_dir), "--index", str(folder.path), "--method", method, "--budget", "8",
                 "--out", str(tmp_path / "run"), "--cache", str(cache)]) == 0
    capsys.readouterr()

    index = gi.Index.open(folder.path, dataset=f"beir:{beir_dir}")
    retriever = gi.Retriever(index, method=method, budget=8, preset="cpu-default", cache=cache)
    found = retriever.search(index.topics())
    assert list(found.columns) == ["qid", "docno", "rank", "score"]
    assert frame_rows(found) == trec_rows(tmp_path / "run" / "run.trec")  # q3's excluded py2 left out alike
    assert "py2" not in set(found[found.qid == "q3"].docno)

    ledger = retriever.ledger.set_index("qid")
    trace = {r["qid"]: r["ledger"] for r in map(json.loads,
                                                (tmp_path / "run" / "trace.jsonl").read_text().splitlines())}
    assert sorted(ledger.index) == sorted(trace)
    for qid, cost in trace.items():
        assert ledger.loc[qid, "budget_used"] == cost["budget_used"] and ledger.loc[qid, "requests"] == cost["requests"]


def test_search_reads_the_response_cache_garen_infer_run_wrote(tiny_index, tiny_dataset, beir_dir,
                                                               tiny_model_dir, tmp_path, capsys):
    reranker = {"backend": "transformers", "model": str(tiny_model_dir), "device": "cpu", "prompt": "rankgpt",
                "max_words": 20,
                "sampling": {"max_tokens": 8}}
    cache = tmp_path / "responses.sqlite"
    assert main(["run", "--dataset", str(beir_dir), "--index", str(tiny_index.path), "--method", "rerank",
                 "--budget", "6",
                 "--limit", "2", "--set", f"models.reranker={json.dumps(reranker)}", "--out",
                 str(tmp_path / "run"), "--cache", str(cache)]) == 0
    capsys.readouterr()
    trace = [json.loads(line) for line in (tmp_path / "run" / "trace.jsonl").read_text().splitlines()]
    assert all(r["ledger"]["model_calls"] > 0 for r in trace)  # the run asked the model

    index = gi.Index.open(tiny_index.path, tiny_dataset)
    retriever = gi.Retriever(index, "rerank", budget=6, overrides={"models.reranker": reranker}, cache=cache)
    found = retriever.search({r["qid"]: next(q.text for q in tiny_dataset.queries if q.id == r["qid"]) for r in trace})
    assert frame_rows(found) == trec_rows(tmp_path / "run" / "run.trec")
    assert (retriever.ledger.model_calls == 0).all()  # every answer came from the run's cache
    assert list(retriever.ledger.cache_hits) == [r["ledger"]["model_calls"] + r["ledger"]["cache_hits"] for r in trace]


def test_a_query_of_ones_own_and_overrides(tiny_index, tiny_dataset, tmp_path):
    index = gi.Index.open(tiny_index.path, tiny_dataset)
    narrow = gi.Retriever(index, "rerank", budget=4,
                          overrides={"methods.rerank.window": 2, "methods.rerank.stride": 1}, cache=False)
    assert narrow.config.options.window == 2
    found = narrow.search({"mine": "lava flowing from a volcano"})
    assert set(found.qid) == {"mine"} and list(found["rank"]) == list(range(len(found)))
    assert found.docno.iloc[0].startswith("vol")
    assert list(found.score) == sorted(found.score, reverse=True) and found.score.is_unique
    assert narrow.ledger.loc[0, "qid"] == "mine" and 0 < narrow.ledger.loc[0, "budget_used"] <= 4
    # a query with a dataset query's id but other words is a new query: the dataset's exclusions are its own
    assert "py2" in set(narrow.search({"q3": "python dictionary keys"}).docno)


def test_rerank_starts_from_the_given_first_stage(tiny_index, tiny_dataset):
    index = gi.Index.open(tiny_index.path, tiny_dataset)
    order = ["py4", "pho2", "vol3", "py1"]  # a first stage of someone else's, not the index's BM25
    import pandas as pd

    given = pd.DataFrame({"qid": "x", "query": "anything at all", "docno": order, "rank": range(4)})
    kept = gi.Retriever(index, "bm25", cache=False).rerank(given)  # bm25 keeps the first stage as it is
    assert list(kept.docno) == order


def test_run_writes_the_cli_run_folder(tiny_index, tiny_dataset, tmp_path):
    index = gi.Index.open(tiny_index.path, tiny_dataset)
    metrics = gi.Retriever(index, "bm25", cache=False).run(tmp_path / "run", limit=2)
    assert metrics["queries"] == 2 and (tmp_path / "run" / "run.trec").is_file()
    assert metrics == json.loads((tmp_path / "run" / "metrics.json").read_text())


def test_index_build_is_garen_infer_index(beir_dir, tmp_path):
    index = gi.Index.build(str(beir_dir), tmp_path / "idx",
                           overrides={"index": {"bm25": {"variant": "bm25s"}}}, log=lambda m: None)
    assert index.stages == ["bm25"] and index.folder.manifest["corpus"]["doc_count"] == 12
    assert len(index.topics()) == 4 and set(index.qrels().columns) == {"qid", "docno", "label"}


def refused(call):
    with pytest.raises(gi.GarenError) as info:
        call()
    return info


@pytest.mark.parametrize("call, words", [
    (lambda index: gi.Retriever(index, "nope"), "unknown method 'nope'"),
    (lambda index: gi.Retriever(index, "rerank", budget=0), "invalid setting Retriever.budget=0"),
    (lambda index: gi.Retriever(index, "rerank", overrides={"methods.rerank.windw": 3}),
     "methods.rerank.windw: no such option"),
    (lambda index: gi.Retriever(index, "rerank", preset="no-such-preset"), "no preset 'no-such-preset'"),
    (lambda index: gi.Retriever(index, "bm25", cache=3), "cache: expected None"),
    (lambda index: gi.Retriever(index, "bm25", cache=False).search({}), "no queries to search"),
    (lambda index: gi.Retriever(index, "bm25", cache=False).search({"q": "  "}), "query 'q' has no text"),
    (lambda index: gi.Retriever(index, "bm25", cache=False).search(["why"]), "expected {qid: text}"),
    (lambda index: gi.Retriever(index, "bm25", cache=False).search(index.qrels()), "no column 'query'"),
    (lambda index: gi.Retriever(index, "bm25", cache=False).rerank(index.topics()), "lacks docno"),
])
def test_refusals_are_one_line_garen_errors_raised_from_the_call(call, words, tiny_index, tiny_dataset):
    index = gi.Index.open(tiny_index.path, tiny_dataset)
    info = refused(lambda: call(index))
    message = str(info.value)
    assert words in message and "\n" not in message
    # raised from the API's entry point, not from deep inside the layers below it
    deepest = traceback.extract_tb(info.value.__traceback__)[-1]
    assert Path(deepest.filename) == REPO / "garen_infer" / "doors" / "api.py", traceback.format_tb(
        info.value.__traceback__
    )


def test_rerank_refuses_documents_of_another_corpus(tiny_index, tiny_dataset):
    import pandas as pd

    index = gi.Index.open(tiny_index.path, tiny_dataset)
    given = pd.DataFrame({"qid": ["x"], "query": ["lava"], "docno": ["elsewhere-7"], "score": [1.0]})
    message = str(refused(lambda: gi.Retriever(index, "bm25", cache=False).rerank(given)).value)
    assert "document 'elsewhere-7' of query 'x' is not in the corpus" in message


def test_index_open_refusals(tiny_index, tiny_dataset, tmp_path, beir_dir):
    assert "not an index folder" in str(refused(lambda: gi.Index.open(tmp_path, tiny_dataset)).value)
    assert "not a folder" in str(refused(lambda: gi.Index.open(tiny_index.path, f"beir:{tmp_path / 'absent'}")).value)
    smaller = write_beir(tmp_path / "smaller", docs=DOCS[:4], queries=QUERIES[:1], qrels=QRELS[:3])
    other = gi.Index.build(str(smaller), tmp_path / "other", overrides={"index": {"bm25": {}}}, log=lambda m: None)
    assert "was built for corpus 'smaller/test'" in str(refused(lambda: gi.Index.open(other.path, tiny_dataset)).value)


def test_an_index_folder_deleted_after_open_is_a_garen_error(beir_dir, tmp_path):
    import shutil

    index = gi.Index.build(str(beir_dir), tmp_path / "idx",
                           overrides={"index": {"bm25": {"variant": "bm25s"}}}, log=lambda m: None)
    retriever = gi.Retriever(index, "bm25", cache=False)
    assert len(retriever.search({"q": "lava"})) > 0
    shutil.rmtree(tmp_path / "idx")
    for call in (lambda: retriever.search({"q": "lava"}),
                 lambda: gi.Retriever(index, "bm25", cache=False).run(tmp_path / "run")):
        assert str(refused(call).value) == (f"{tmp_path / 'idx'}: the index folder is gone (deleted or moved "
                                            f"since Index.open); build it or open it again where it is now")


def test_storage_failures_are_garen_errors(tiny_index, tiny_dataset, tmp_path, monkeypatch):
    import errno

    from garen_infer.storage import atomic

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "run" / "config.json"))

    monkeypatch.setattr(atomic.tempfile, "mkdtemp", full_disk)
    index = gi.Index.open(tiny_index.path, tiny_dataset)
    message = str(refused(lambda: gi.Retriever(index, "bm25", cache=False).run(tmp_path / "run")).value)
    assert "No space left on device" in message and "free some space" in message


def test_import_garen_infer_stays_cheap():
    """``import garen_infer`` loads neither pandas nor numpy nor the engine: the API comes on first use."""
    heavy = ("('pandas', 'numpy', 'torch', 'garen_infer.doors.api', 'garen_infer.running.runner', "
             "'garen_infer.running.session')")
    code = f"import sys, garen_infer; print(sorted(m for m in {heavy} if m in sys.modules))"
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True
    ).stdout.strip()
    assert loaded == "[]"


def test_no_door_but_the_entry_point_imports_the_cli():
    """Configuration is built below the CLI (config.run_config_from): demo, bench, mining and the Python API never
    reach up into the command line."""
    importers = []
    for path in sorted([*REPO.glob("garen_infer/**/*.py"), *REPO.glob("garen_train/**/*.py")]):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if any(n == "garen_infer.doors.cli" for n in names):
                importers.append(str(path.relative_to(REPO)))
    assert importers == ["garen_infer/__main__.py"]


def test_an_empty_document_names_the_argument_that_keeps_it(tmp_path):
    """From Python the way out is allow_empty_docs=True, not the CLI's flag."""
    folder = write_beir(tmp_path / "empty", docs=[*DOCS[:3], ("blank", "", "")], queries=QUERIES[:1], qrels=QRELS[:1])

    def build(**options):
        return gi.Index.build(f"beir:{folder}", tmp_path / "idx", overrides={"index": {"bm25": {}}},
                              log=lambda m: None, **options)

    message = str(refused(build).value)
    assert (
        "empty (and so is 'title'); pass allow_empty_docs=True to keep such documents" in message
        and "--allow" not in message
    )
    assert "blank" in build(allow_empty_docs=True).dataset.doc_index


def own_score_or_lowered(written: list[float], own: list[float]) -> None:
    """Each frame score is the document's own at float32 (trec_eval's precision) or, where a tie or a rise had
    to be broken, below it; and they decrease strictly down the ranking."""
    import numpy as np

    written32, own32 = np.float32(written), np.float32(own)
    assert (written32 <= own32).all() and (written32 == own32).any()
    assert (np.diff(written32) < 0).all()


def test_a_bm25_frame_carries_bm25s_scores_and_a_rerank_frame_cosines(tiny_dataset, tiny_index):
    import numpy as np

    index = gi.Index.open(tiny_index.path, tiny_dataset)
    texts = {q.id: q.text for q in tiny_dataset.queries}
    row_of = {d: r for r, d in enumerate(tiny_dataset.doc_ids)}
    found = gi.Retriever(index, "bm25", preset="cpu-default", cache=False).search(index.topics())
    for qid, group in found.groupby("qid", sort=False):
        bm25s = tiny_index.bm25.scores(texts[qid])
        own_score_or_lowered(list(group.score), [float(bm25s[row_of[d]]) for d in group.docno])

    rerank = gi.Retriever(index, "rerank", budget=8, preset="cpu-default", cache=False)
    reranked = rerank.search(index.topics())
    vectors = np.asarray(tiny_index.embeddings, dtype=np.float32)
    for qid, group in reranked.groupby("qid", sort=False):
        cosines = vectors @ tiny_index.embedder.query_vectors([texts[qid]])[0]
        assert list(group.score) == pytest.approx([float(cosines[row_of[d]]) for d in group.docno], abs=1e-5)
        assert list(group.score) != [float(len(group) - r) for r in range(len(group))]
