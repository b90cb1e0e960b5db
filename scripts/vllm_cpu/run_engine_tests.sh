#!/usr/bin/env bash
# The engine tests end to end, from any state: build .venv-vllm (idempotent), convert the Gemma 3 270M
# checkpoint (idempotent), then run each tests/engines module in a pytest process of its own and print the
# measured gaps, pytest's summaries and the peak resident memory of each module's process tree (its proportional
# set size: pages shared between its processes counted once, peak_rss.py).
#
# One process per module: an engine's memory (weights, KV cache, vLLM's process-wide state) is returned to the
# machine when its module ends, so the peak is the largest module's, not the sum of every engine the suite starts.
#
# Usage: bash scripts/vllm_cpu/run_engine_tests.sh [extra pytest args, e.g. -k lora]
# Env: VLLM_VENV (default .venv-vllm); ENGINE_SETUP=0 uses that environment as it is (installs nothing into it);
#      ENGINE_TEST_LOGS (default runs/engine-tests) holds each module's full log;
#      ENGINE_TEST_MODULES="test_vllm_lora test_openai_server" runs those modules only (default: every one).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${VLLM_VENV:-$ROOT/.venv-vllm}"
START=$(date +%s)

if [[ "${ENGINE_SETUP:-1}" != "0" ]]; then
  bash "$ROOT/scripts/vllm_cpu/setup.sh"
elif [[ ! -f "$VENV/.garen-vllm-ok" ]]; then
  echo "[engine-tests] ENGINE_SETUP=0 but $VENV is not a finished vLLM environment (no .garen-vllm-ok)" >&2
  exit 2
fi
"$VENV/bin/python" "$ROOT/scripts/vllm_cpu/convert_gemma.py"

cd "$ROOT"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}"
LOGS="${ENGINE_TEST_LOGS:-$ROOT/runs/engine-tests}"
mkdir -p "$LOGS"
PEAKS="$LOGS/peak-rss.txt"
: >"$PEAKS"
# A module whose tests start and stop engines of their own runs a process per test: a closed in-process engine
# does not give all of its memory back, so one process would hold every engine the module ever started.
PER_TEST=" test_export_engines "
units() {
  for module in tests/engines/test_*.py; do
    wanted=" ${ENGINE_TEST_MODULES:-$(basename "$module" .py)} "
    [[ "$wanted" == *" $(basename "$module" .py) "* ]] || continue
    if [[ "$PER_TEST" == *" $(basename "$module" .py) "* ]]; then
      "$VENV/bin/python" -m pytest "$module" --collect-only -q -p no:cacheprovider "$@" 2>/dev/null | grep "::" || true
    else
      echo "$module"
    fi
  done
}
STATUS=0
mapfile -t UNITS < <(units "$@")
for unit in "${UNITS[@]}"; do
  name="$(basename "${unit/.py/}")"
  log="$LOGS/${name//[^A-Za-z0-9_.-]/_}.log"
  set +e
  "$VENV/bin/python" scripts/vllm_cpu/peak_rss.py "$PEAKS" "$name" -- \
    "$VENV/bin/python" -m pytest "$unit" -q -s -rfEs -p no:cacheprovider "$@" >"$log" 2>&1
  code=$?
  set -e
  [[ $code -eq 5 ]] && code=0  # -k selected nothing in this module
  [[ $code -ne 0 ]] && STATUS=$code
  # vLLM logs at INFO to stderr; show the measured gaps and pytest's own summary only.
  grep -E "max \|dP\(yes\)\||server restarted|is not answering|queries are saved" "$log" || true
  grep -E "^(FAILED|ERROR|SKIPPED) " "$log" || true
  grep -E "^\[peak_rss\]   " "$log" | head -n 3 || true  # the three largest processes at the unit's peak
  summary="$(grep -E "^=*\s*[0-9]+ (passed|failed|skipped|error|deselected)" "$log" | tail -n 1 || true)"
  (( code > 128 )) && summary="killed by signal $((code - 128)) (the kernel's OOM killer sends 9)"
  peak="$(awk -v m="$name" '$1 == m {printf "%.2f", $2 / 2^30}' "$PEAKS")"
  echo "[engine-tests] $name: ${summary:-no summary, exit $code} | peak PSS ${peak} GiB"
done
awk '$2 > max {max = $2; at = $1} END {printf "[engine-tests] peak resident memory: %.2f GiB (%s)\n", max / 2^30, at}' "$PEAKS"
echo "[engine-tests] exit $STATUS in $(( $(date +%s) - START )) s (full logs: $LOGS)"
exit $STATUS
