#!/usr/bin/env bash
# LATTICE and LATTICE++ next to retrieve-and-rerank and GAREN at an equal observation budget of
# 100 documents (GAREN App. B.2), on SciFact (test) and Cranfield, CPU default preset; the semantic tree's build
# time and shape. LATTICE without a budget (the paper's 20 iterations) and with calibrated path relevance too.
# Usage: bash benchmarks/lattice.sh [OUT_DIR] [PREBUILT_INDEX_DIR]
#   PREBUILT_INDEX_DIR: cpu-default indexes (<dir>/scifact, <dir>/cranfield) copied instead of built from scratch
#   LIMIT=N: the first N test queries of each dataset only
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-benchmarks/out}
PREBUILT=${2:-}
BIN=${BIN:-.venv/bin}
export HF_HUB_OFFLINE=1 GAREN_CACHE_DIR=${GAREN_CACHE_DIR:-$OUT/cache}
DATA=${GAREN_DATA:-../shared/data}  # a folder holding scifact/ and cranfield/
declare -A SPEC=([scifact]="beir:$DATA/scifact:test" [cranfield]="beir:$DATA/cranfield:test")
extra_for() { [ "$1" = cranfield ] && echo "--allow-empty-docs" || true; }
for ds in cranfield scifact; do  # the comparison at 100 documents first
  if [ -n "$PREBUILT" ] && [ ! -d "$OUT/idx/$ds" ]; then mkdir -p "$OUT/idx" && cp -r "$PREBUILT/$ds" "$OUT/idx/$ds"; fi
  /usr/bin/time -f "[$ds] index (missing stages only): %e s wall, %M KB max RSS" \
    $BIN/garen-infer index --dataset "${SPEC[$ds]}" $(extra_for $ds) --out "$OUT/idx/$ds" > /dev/null
  $BIN/garen-infer tree --index "$OUT/idx/$ds" --depth 1
  for m in rerank garen lattice lattice++; do
    $BIN/garen-infer run --dataset "${SPEC[$ds]}" $(extra_for $ds) --index "$OUT/idx/$ds" --method $m --budget 100 ${LIMIT:+--limit $LIMIT} --out "$OUT/runs/$ds-$m-100" > /dev/null
  done
done
for ds in cranfield scifact; do  # then LATTICE as the paper runs it (20 iterations, no budget) and paper-mode paths
  $BIN/garen-infer run --dataset "${SPEC[$ds]}" $(extra_for $ds) --index "$OUT/idx/$ds" --method lattice ${LIMIT:+--limit $LIMIT} --out "$OUT/runs/$ds-lattice-20it" > /dev/null
  $BIN/garen-infer run --dataset "${SPEC[$ds]}" $(extra_for $ds) --index "$OUT/idx/$ds" --method lattice --budget 100 \
    --set methods.lattice.path_relevance=paper ${LIMIT:+--limit $LIMIT} --out "$OUT/runs/$ds-lattice-paperpath-100" > /dev/null
done
$BIN/python benchmarks/report.py "$OUT"/runs/*/metrics.json
for ds in cranfield scifact; do
  $BIN/python -c "import json; i=json.load(open('$OUT/idx/$ds/manifest.json'))['stages']['semantic_tree']['info']; print('$ds tree:', i)"
done
