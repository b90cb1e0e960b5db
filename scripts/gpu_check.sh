#!/usr/bin/env bash
# What a lent GPU machine must show before a real run trusts it, in under 8 minutes, with tiny in-process models
# (no vLLM, no faiss, no network; the checks themselves: scripts/gpu_check.py).
#
#   scripts/gpu_check.sh                  on a CUDA machine (torch, transformers, peft, lightning,
#                                         sentence-transformers, torch-geometric, and pytest for the tiny builders)
#   scripts/gpu_check.sh --cpu-dry-run    the same checks on the CPU, before a GPU session spends its time
#   scripts/gpu_check.sh --only transformers_backend embeddings_release
#
# Output: one line per check, then a summary; the exit status is 0 only when every check passed (124: the time
# limit, GPU_CHECK_SECONDS, default 480, ran out).
#   CHECK transformers_backend: PASS device=cuda dtype=bfloat16 max_dp_yes=0.0031 greedy_equal=4/4 tool_turns=2 seconds=9.8
#   CHECK embeddings_release: FAIL reason=device_memory_not_handed_back device=cuda ... free=0.712 seconds=4.1
#   SUMMARY: 3 of 4 passed on cuda in 95 s; failed: embeddings_release
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
exec timeout --kill-after=10 "${GPU_CHECK_SECONDS:-480}" "$PYTHON" scripts/gpu_check.py "$@"
