"""R2MED through ``r2med:<task>``: a local copy in the layout of the hub repositories (corpus.jsonl, query.jsonl,
qrels.jsonl), and the hub name served from that copy (nothing is downloaded)."""

from __future__ import annotations

import json

import pytest

from garen_infer.data.r2med import load_r2med
from garen_infer.data.spec import load_dataset, load_judgments
from garen_infer.errors import GarenError

CORPUS = [{"id": "d1", "text": " Anaemia from iron deficiency. "},
          {"id": "d2", "text": "Vitamin B12 and nerve damage."},
          {"id": "d3", "text": "Thyroid hormone and metabolism."}]
QUERIES = [{"id": "q1", "text": "Fatigue, pale skin, brittle nails: what deficiency?"},
           {"id": "q2", "text": "Tingling feet in a vegan."}]
QRELS = [{"q_id": "q1", "p_id": "d1", "score": 1}, {"q_id": "q2", "p_id": "d2", "score": 1}]


def write_task(folder, corpus=CORPUS, queries=QUERIES, qrels=QRELS):
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in (("corpus", corpus), ("query", queries), ("qrels", qrels)):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


@pytest.fixture
def r2med_copy(tmp_path, monkeypatch):
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets-cache")
    return write_task(tmp_path / "R2MED" / "Biology")


def test_a_local_copy(r2med_copy):
    ds = load_r2med("biology", source=str(r2med_copy))  # the task's name in any case
    assert ds.name == "r2med/Biology" and ds.doc_ids == ["d1", "d2", "d3"]
    assert ds.documents[0].text == "Anaemia from iron deficiency."
    assert [q.id for q in ds.queries] == ["q1", "q2"] and ds.qrels == {"q1": {"d1": 1}, "q2": {"d2": 1}}
    assert len(load_dataset(f"r2med:Biology@{r2med_copy}").queries) == 2


def test_judgments_without_the_corpus(r2med_copy):
    full = load_dataset(f"r2med:Biology@{r2med_copy}")
    (r2med_copy / "corpus.jsonl").unlink()
    judgments = load_judgments(f"r2med:Biology@{r2med_copy}")
    assert judgments.judgments_only
    assert (judgments.name, judgments.queries, judgments.qrels) == (full.name, full.queries, full.qrels)


def test_the_hub_datasets_by_task_and_revision(r2med_copy, monkeypatch):
    import datasets

    real, asked = datasets.load_dataset, []

    def load(path, name=None, split=None, revision=None, **kwargs):
        if not path.startswith("R2MED/"):
            return real(path, name, split=split, **kwargs)
        asked.append((path, name, split, revision))
        return real("json", data_files=str(r2med_copy / f"{name}.jsonl"), split="train")

    monkeypatch.setattr(datasets, "load_dataset", load)
    assert load_dataset("r2med:Biology").qrels == {"q1": {"d1": 1}, "q2": {"d2": 1}}
    load_dataset("r2med:Biology@8b9fec2")
    assert asked == [("R2MED/Biology", c, c, None) for c in ("corpus", "query", "qrels")] + \
                    [("R2MED/Biology", c, c, "8b9fec2") for c in ("corpus", "query", "qrels")]


def test_bad_copies_are_refused_in_one_line(tmp_path, monkeypatch):
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets-cache")
    with pytest.raises(GarenError, match="unknown task 'Cardiology'; choose one of Biology"):
        load_r2med("Cardiology", source=str(tmp_path))
    bad = write_task(tmp_path / "bad", qrels=[{"q_id": "q1", "p_id": "d9", "score": 1}])
    with pytest.raises(GarenError, match=r"qrels, line 1, field 'p_id': document 'd9' is not in the corpus"):
        load_r2med("Biology", source=str(bad))
    (bad / "query.jsonl").unlink()
    with pytest.raises(GarenError, match=r"query.jsonl: file not found"):
        load_r2med("Biology", source=str(bad))
