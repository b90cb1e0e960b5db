#!/usr/bin/env bash
# What a lent GPU machine's minutes should tell us, in under 8 minutes on one H200 with the stock image (torch,
# transformers, peft; no vLLM, no hub): the presets' models at their real shapes with random weights (the checks
# themselves and the JSON they print: scripts/gpu_check.py).
#
#   scripts/gpu_check.sh                  on a CUDA machine
#   scripts/gpu_check.sh --cpu-dry-run    the same code on the CPU, the models shrunk to two layers (seconds)
#   scripts/gpu_check.sh --only yes_no_drift memory_shares
#
# Output: one JSON document; the exit status is 1 when a check failed, 0 otherwise (a check whose package is
# missing is "skipped" with its reason; 124: the time limit, GPU_CHECK_SECONDS, default 480, ran out).
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec timeout --kill-after=10 "${GPU_CHECK_SECONDS:-480}" "$PYTHON" scripts/gpu_check.py "$@"
