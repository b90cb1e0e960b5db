"""``index.embeddings.backend: onnx | openvino``: the packaged all-MiniLM-L6-v2 exported to ONNX here, from its local
weights, and run by ONNX Runtime or OpenVINO. Their vectors agree with torch's; the export is made once per
weights; a wrong combination or a missing package is one line."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from garen_infer.errors import GarenError
from garen_infer.llm.embeddings import Embedder, EmbeddingParams, load_encoder

TEXTS = ["A volcano erupts when magma rises through the crust.", "photosynthesis",
         "Python is a programming language whose design stresses readability. " * 12, "x"]


@pytest.fixture(scope="module")
def export_cache(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        path = tmp_path_factory.mktemp("cache")
        patch.setenv("GAREN_CACHE_DIR", str(path))
        yield path


@pytest.fixture(scope="module")
def torch_vectors():
    return Embedder(EmbeddingParams()).encode_documents(TEXTS, show_progress=False)


def vectors(export_cache, **params) -> np.ndarray:
    load_encoder.cache_clear()
    return Embedder(EmbeddingParams(**params)).encode_documents(TEXTS, show_progress=False)


@pytest.mark.parametrize(("backend", "package"), [("onnx", "onnxruntime"), ("openvino", "openvino")])
def test_fp32_vectors_agree_with_torch(backend, package, export_cache, torch_vectors):
    pytest.importorskip(package)
    found = vectors(export_cache, backend=backend)
    assert found.shape == torch_vectors.shape and found.dtype == np.float32
    assert np.allclose(np.linalg.norm(found, axis=1), 1, atol=1e-5)
    assert np.min(np.sum(found * torch_vectors, axis=1)) > 0.9999


@pytest.mark.parametrize(("backend", "package", "floor"), [("onnx", "onnxruntime", 0.97), ("openvino", "nncf", 0.995)])
def test_int8_vectors_stay_close_to_torch(backend, package, floor, export_cache, torch_vectors):
    pytest.importorskip(package)
    found = vectors(export_cache, backend=backend, quantization="int8")
    cosines = np.sum(found * torch_vectors, axis=1)
    assert np.min(cosines) > floor and np.max(cosines) < 0.99999  # close, and not the fp32 model under another name


def test_bf16_vectors_stay_close_to_torch(export_cache, torch_vectors):
    """The CPU presets' backend. bf16 runs where the CPU has AMX or AVX512_BF16 and f32 elsewhere: close either way."""
    pytest.importorskip("openvino")
    found = vectors(export_cache, backend="openvino", precision="bf16")
    assert found.dtype == np.float32 and np.allclose(np.linalg.norm(found, axis=1), 1, atol=1e-5)
    assert np.min(np.sum(found * torch_vectors, axis=1)) > 0.999


def test_threads_encoding_at_once_get_each_their_own_vectors(export_cache):
    """Agents and the scheduler's workers encode from several threads: each gets what it would get alone."""
    from concurrent.futures import ThreadPoolExecutor

    pytest.importorskip("openvino")
    load_encoder.cache_clear()
    embedder = Embedder(EmbeddingParams(backend="openvino"))
    alone = [embedder.encode_documents([t], show_progress=False)[0] for t in TEXTS]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda t: embedder.encode_documents([t], show_progress=False)[0], TEXTS * 8))
    assert all(np.allclose(v, alone[i % len(TEXTS)], atol=1e-6) for i, v in enumerate(together))


def test_the_export_is_made_once_per_weights(export_cache, monkeypatch):
    pytest.importorskip("onnxruntime")
    from garen_infer.llm import runtime_encoders

    vectors(export_cache, backend="onnx")
    exports = sorted(p.relative_to(export_cache) for p in export_cache.rglob("*.onnx"))
    assert exports and all(str(p).startswith("embedders/model-") for p in exports)

    def no_export(*_):
        raise AssertionError("exported again")

    monkeypatch.setattr(runtime_encoders, "_export", no_export)
    vectors(export_cache, backend="onnx")  # read back, not exported again


def test_other_weights_get_another_export(tmp_path):
    from garen_infer.llm.runtime_encoders import weights_digest

    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    before = weights_digest(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"retrained")
    assert weights_digest(tmp_path) != before


@pytest.mark.parametrize(("params", "message"), [
    ({"quantization": "int8"}, "quantization int8 needs backend onnx or openvino"),
    ({"backend": "onnx", "device": "cuda"}, "backend onnx runs on the CPU, not device 'cuda'"),
    ({"precision": "bf16"}, "precision bf16 needs backend openvino: with backend torch, set precision f32"),
    ({"backend": "onnx", "precision": "bf16"}, "precision bf16 needs backend openvino"),
])
def test_a_combination_that_cannot_run_is_one_line(params, message):
    with pytest.raises((GarenError, ValueError), match=message):  # ValueError: refused by the params themselves
        Embedder(EmbeddingParams(**params))


def test_a_combination_set_in_a_preset_is_refused_before_any_stage_is_built():
    """cpu-default sets precision bf16: turning its backend to torch alone says what else to set."""
    from garen_infer.index.stages import IndexConfig

    with pytest.raises(GarenError, match=r"invalid setting index\.embeddings: precision bf16 needs backend openvino: "
                                         r"with backend torch, set precision f32"):
        IndexConfig.from_dict({"embeddings": {"backend": "torch", "precision": "bf16"}})


def test_an_unknown_backend_is_refused_where_the_preset_sets_it():
    from garen_infer.index.stages import IndexConfig

    with pytest.raises(GarenError, match=r"index\.embeddings\.backend='tensorrt'.*'torch', 'onnx', 'openvino'"):
        IndexConfig.from_dict({"embeddings": {"backend": "tensorrt"}})


def test_a_missing_package_is_named_with_its_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime then raises ImportError
    load_encoder.cache_clear()
    with pytest.raises(GarenError, match=r"needs the package 'onnxruntime' \(pip install 'garen-ir\[onnx\]'\)"):
        Embedder(EmbeddingParams(backend="onnx"))


def test_the_backend_is_part_of_the_index_identity_and_old_indexes_keep_theirs():
    from dataclasses import asdict

    from garen_infer.index.folder import same_result

    recorded = {k: v for k, v in asdict(EmbeddingParams()).items() if k not in ("backend", "quantization", "precision",
                                                                                       "threads")}
    assert same_result(EmbeddingParams, recorded, asdict(EmbeddingParams()))  # built before the option existed
    assert same_result(EmbeddingParams, recorded, asdict(EmbeddingParams(threads=1)))  # how it runs only
    assert not same_result(EmbeddingParams, recorded, asdict(EmbeddingParams(backend="onnx")))
    assert not same_result(EmbeddingParams, recorded, asdict(EmbeddingParams(backend="openvino", precision="bf16")))


def test_options_embedding_lists_the_index_stage_backend():
    from garen_infer.configuration.option_docs import options_text

    text = options_text("embedding")
    assert "index.embeddings: " in text
    assert "backend = 'torch'    one of 'torch', 'onnx', 'openvino'" in text
    assert "quantization = ''    one of '', 'int8'" in text
    assert "precision = 'f32'    one of 'f32', 'bf16'" in text
    assert "(undocumented)" not in text
