#!/usr/bin/env bash
# Before/after table of two code versions: every method at budget 100, cpu-default, on SciFact (test) and Cranfield.
# Usage: bash benchmarks/fidelity.sh CODE_DIR INDEX_ROOT OUT_DIR [EXTRA --set ARGS...]
#   CODE_DIR: the garen checkout whose code runs (PYTHONPATH); INDEX_ROOT holds scifact/ and cranfield/ indexes.
# Prints one line per run (benchmarks/report.py). Runs are resumable; reruns reuse the response cache.
set -euo pipefail
CODE=$(cd "$1" && pwd); IDX=$2; OUT=$3; shift 3
BIN=${GAREN_BIN:-$(cd "$(dirname "$0")/.." && pwd)/.venv/bin}
DATA=${GAREN_DATA:-$(cd "$(dirname "$0")/../.." && pwd)/shared/data}
export PYTHONPATH=$CODE HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 GAREN_CACHE_DIR=${GAREN_CACHE_DIR:-$OUT/cache}
declare -A SPEC=([scifact]="beir:$DATA/scifact:test" [cranfield]="beir:$DATA/cranfield:test")
for ds in scifact cranfield; do
  extra=""; [ "$ds" = cranfield ] && extra="--allow-empty-docs"
  for m in bm25 rerank slidegar garen rgs; do
    /usr/bin/time -f "[$ds $m] %e s wall" $BIN/garen-infer run --dataset "${SPEC[$ds]}" $extra --index "$IDX/$ds" \
      --method $m --budget 100 --out "$OUT/runs/$ds-$m" "$@" > /dev/null
  done
done
$BIN/python "$CODE/benchmarks/report.py" "$OUT"/runs/*/metrics.json
