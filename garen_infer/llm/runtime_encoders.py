"""A sentence-transformers model run by ONNX Runtime or OpenVINO instead of torch (``backend: onnx|openvino``).

The model's transformer is exported to ONNX here, from its local weights (no hub), once per weights and
settings: the export lands under ``$GAREN_CACHE_DIR/embedders`` (default ``~/.cache/garen/embedders``), written
atomically and named by a digest of the weight files, so replaced weights get a new export. ``quantization:
int8`` keeps 8-bit weights: ONNX Runtime's dynamic quantization, or OpenVINO's weight compression (nncf);
``precision: bf16`` has OpenVINO compute in bfloat16 on CPUs that have the instructions (AMX, AVX512_BF16).
Tokenising and pooling stay the model's own (its tokenizer, its ``1_Pooling`` mean or CLS, L2 normalised), so
the vectors agree with torch's to float rounding in fp32; ``benchmarks/embedding_backends.py`` measures both
the agreement and the speed.

The encoder answers the calls ``Embedder`` makes of a ``SentenceTransformer``: ``encode``,
``get_sentence_embedding_dimension``, ``set_pooling_include_prompt`` and ``max_seq_length``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from garen_infer.errors import GarenError
from garen_infer.llm.quiet import captured_output
from garen_infer.storage.atomic import atomic_path

BACKENDS = ("torch", "onnx", "openvino")
QUANTIZATIONS = ("", "int8")
PRECISIONS = ("f32", "bf16")
OPSET = 17
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
PACKAGES = {"onnx": "onnxruntime", "openvino": "openvino"}


def check_backend(backend: str, quantization: str, precision: str = "f32") -> None:
    if backend not in BACKENDS:
        raise GarenError(f"embeddings backend '{backend}': choose one of {', '.join(BACKENDS)}")
    if quantization not in QUANTIZATIONS:
        raise GarenError(f"embeddings quantization '{quantization}': choose '' (full precision) or int8")
    if quantization and backend == "torch":
        raise GarenError("embeddings quantization int8 needs backend onnx or openvino (torch runs fp32)")
    if precision not in PRECISIONS:
        raise GarenError(f"embeddings precision '{precision}': choose f32 or bf16")
    if precision == "bf16" and backend != "openvino":
        raise GarenError(f"embeddings precision bf16 needs backend openvino: with backend {backend}, set precision "
                         f"f32 ({backend} computes in the weights' dtype; torch on a GPU takes dtype: bfloat16)")


def export_root() -> Path:
    root = os.environ.get("GAREN_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "garen"
    return Path(root) / "embedders"


def weights_digest(folder: Path) -> str:
    """A digest of the model's weight and tokenizer files (their bytes): another checkpoint, another export."""
    digest = hashlib.sha256(f"opset{OPSET}".encode())
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.suffix in (".safetensors", ".bin", ".json", ".txt"):
            digest.update(path.name.encode())
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 22), b""):
                    digest.update(block)
    return digest.hexdigest()[:16]


class RuntimeEncoder:
    def __init__(self, folder: str, backend: str, quantization: str = "", threads: int = 0,
                 max_seq_length: int = 256, precision: str = "f32"):
        package = PACKAGES[backend]
        try:
            __import__(package)
        except ImportError as err:
            raise GarenError(f"embeddings backend {backend} needs the package '{package}' "
                             f"(pip install 'garen-ir[{backend}]')") from err
        self.folder = Path(folder)
        if not (self.folder / "config.json").is_file():
            raise GarenError(f"embeddings backend {backend}: '{folder}' is not a local model folder (it exports "
                             f"from local weights only)")
        self.pooling = _pooling(self.folder)
        self.normalize = (self.folder / "2_Normalize").is_dir() or _has_module(self.folder, "Normalize")
        from transformers import AutoConfig, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(self.folder))
        self.config = AutoConfig.from_pretrained(str(self.folder))
        self.max_seq_length = max_seq_length
        onnx_file = exported_model(self.folder, quantization if backend == "onnx" else "")
        self.run = (
            _onnx_runner(onnx_file, threads)
            if backend == "onnx"
            else _openvino_runner(onnx_file, quantization, threads, precision)
        )

    def __getitem__(self, index):  # longest_input() reads the transformer's config through encoder[0].auto_model
        return self if index == 0 else None

    @property
    def auto_model(self):
        return self

    def get_sentence_embedding_dimension(self) -> int:
        return int(self.config.hidden_size)

    def set_pooling_include_prompt(self, include: bool) -> None:
        if not include:
            raise GarenError("embeddings pool_prompt: false needs backend torch")

    def encode(self, texts: list[str], prompt: str | None = None, batch_size: int = 32, show_progress_bar: bool = False,
               normalize_embeddings: bool = True, convert_to_numpy: bool = True) -> np.ndarray:
        """One vector per text. Texts are batched by token length (longest first), so a batch pads little."""
        texts = [(prompt or "") + t for t in texts]
        tokens = self.tokenizer(texts, truncation=True, max_length=self.max_seq_length)["input_ids"]
        order = sorted(range(len(texts)), key=lambda i: -len(tokens[i]))
        out = np.zeros((len(texts), self.get_sentence_embedding_dimension()), np.float32)
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            ids, mask = _padded([tokens[i] for i in rows], self.tokenizer.pad_token_id or 0)
            hidden = self.run({"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
            out[rows] = self._pool(hidden, mask, normalize_embeddings)
        return out

    def _pool(self, hidden: np.ndarray, mask: np.ndarray, normalize: bool) -> np.ndarray:
        if self.pooling == "cls":
            vectors = hidden[:, 0]
        else:
            weights = mask[..., None].astype(np.float32)
            vectors = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        if normalize or self.normalize:
            vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return vectors


def _padded(rows: list[list[int]], pad: int) -> tuple[np.ndarray, np.ndarray]:
    width = max(len(r) for r in rows)
    ids = np.full((len(rows), width), pad, np.int64)
    mask = np.zeros((len(rows), width), np.int64)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return ids, mask


def _has_module(folder: Path, kind: str) -> bool:
    try:
        modules = json.loads((folder / "modules.json").read_text())
    except (OSError, ValueError):
        return False
    return any(str(m.get("type", "")).endswith(f".{kind}") for m in modules)


def _pooling(folder: Path) -> str:
    """mean or cls, from the model's ``1_Pooling/config.json`` (mean when it has none, as sentence-transformers)."""
    try:
        config = json.loads((folder / "1_Pooling" / "config.json").read_text())
    except (OSError, ValueError):
        return "mean"
    if config.get("pooling_mode_mean_tokens", True):
        return "mean"
    if config.get("pooling_mode_cls_token"):
        return "cls"
    raise GarenError(f"embeddings backend onnx/openvino: {folder} pools neither by mean nor CLS; use backend torch")


def exported_model(folder: Path, quantization: str = "") -> Path:
    """The ONNX file of ``folder``'s transformer (int8: its dynamically quantized copy), exported on first use."""
    target = export_root() / f"{folder.name}-{weights_digest(folder)}"
    fp32 = target / "model.onnx"
    if not fp32.is_file():
        with atomic_path(fp32) as tmp:
            _export(folder, tmp)
    if quantization != "int8":
        return fp32
    int8 = target / "model-int8.onnx"
    if not int8.is_file():
        from onnxruntime.quantization import QuantType, quantize_dynamic

        with atomic_path(int8) as tmp, quiet_root_logger():
            # per channel: one scale per output row keeps the cosine to fp32 near 0.99; one per tensor, near 0.9
            quantize_dynamic(str(fp32), str(tmp), weight_type=QuantType.QInt8, per_channel=True)
    return int8


@contextmanager
def quiet_root_logger():
    """ONNX Runtime's quantizer writes its advice to the root logger: errors only while it runs."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


def _export(folder: Path, path: Path) -> None:
    import torch
    from transformers import AutoModel

    class Hidden(torch.nn.Module):  # the exporter passes inputs by position: name them for the model
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    model = AutoModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    example = torch.ones((2, 8), dtype=torch.long)
    axes = {name: {0: "batch", 1: "tokens"} for name in (*INPUTS, "last_hidden_state")}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on shapes it freezes; the model runs any shape
        torch.onnx.export(Hidden(model), (example, example, torch.zeros_like(example)), str(path), dynamo=False,
                          input_names=list(INPUTS), output_names=["last_hidden_state"], dynamic_axes=axes,
                          opset_version=OPSET)


def _onnx_runner(path: Path, threads: int):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads  # 0: one per core
    options.log_severity_level = 3  # errors only: its warnings are not the user's
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}
    return lambda feed: session.run(None, {k: v for k, v in feed.items() if k in wanted})[0]


def _openvino_runner(path: Path, quantization: str, threads: int, precision: str = "f32"):
    import openvino as ov

    core = ov.Core()
    model = core.read_model(str(path))
    if quantization == "int8":
        try:
            import nncf
        except ImportError as err:
            raise GarenError("embeddings backend openvino with quantization int8 needs the package 'nncf'") from err
        logging.getLogger("nncf").setLevel(logging.ERROR)  # nncf sets its own level on import: its table, its bar
        with quiet_root_logger(), captured_output("nncf weight compression"):
            model = nncf.compress_weights(model, mode=nncf.CompressWeightsMode.INT8_ASYM)
    # f32 unless asked: OpenVINO itself picks bf16 on CPUs with AMX, and the vectors would move with the CPU.
    # bf16 where the CPU has no bf16 instructions runs f32 (OpenVINO falls back by itself).
    config = {"INFERENCE_PRECISION_HINT": precision}
    if threads:
        config["INFERENCE_NUM_THREADS"] = str(threads)
    compiled = core.compile_model(model, "CPU", config)
    requests = threading.local()  # one infer request per thread: a request runs one inference at a time, and
    #   agents and the scheduler's workers encode from several threads at once

    def run(feed):
        if "request" not in requests.__dict__:
            requests.request = compiled.create_infer_request()
        requests.request.infer(feed)
        return requests.request.get_output_tensor(0).data.copy()  # the request reuses its output buffer

    return run
