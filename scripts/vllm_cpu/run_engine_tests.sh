#!/usr/bin/env bash
# The engine tests end to end, from any state: build .venv-vllm (idempotent), convert the Gemma 3 270M
# checkpoint (idempotent), then run tests/engines in the vLLM environment and print pytest's summary.
#
# Usage: bash scripts/vllm_cpu/run_engine_tests.sh [extra pytest args, e.g. -k lora]
# Warm (environment and checkpoint present): 2.5-3.5 min on 2 cores. Cold: add ~1.5 min setup + ~1 min conversion.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${VLLM_VENV:-$ROOT/.venv-vllm}"
START=$(date +%s)

bash "$ROOT/scripts/vllm_cpu/setup.sh"
"$VENV/bin/python" "$ROOT/scripts/vllm_cpu/convert_gemma.py"

cd "$ROOT"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-2}"
LOG="${ENGINE_TEST_LOG:-/tmp/garen-engine-tests.log}"
set +e
"$VENV/bin/python" -m pytest tests/engines -q -s -rfEs -p no:cacheprovider "$@" >"$LOG" 2>&1
STATUS=$?
set -e
# vLLM logs at INFO to stderr; show the measured gaps and pytest's own summary only.
grep -E "max \|dP\(yes\)\||server restarted|is not answering|queries are saved" "$LOG" || true
grep -E "^(FAILED|ERROR|SKIPPED) " "$LOG" || true
grep -E "^=*\s*[0-9]+ (passed|failed|skipped|error)" "$LOG" | tail -n 1 || tail -n 1 "$LOG"
echo "[engine-tests] exit $STATUS in $(( $(date +%s) - START )) s (full log: $LOG)"
exit $STATUS
