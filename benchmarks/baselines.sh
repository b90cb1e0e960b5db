#!/usr/bin/env bash
# Index build time and bm25 / rerank / slidegar / garen (+ ablations) on SciFact (test) and
# Cranfield at budget 100, CPU default preset. Usage: bash benchmarks/baselines.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-benchmarks/out}
BIN=.venv/bin
export HF_HUB_OFFLINE=1 GAREN_CACHE_DIR=${GAREN_CACHE_DIR:-$OUT/cache}
declare -A SPEC=([scifact]="beir:../shared/data/scifact:test" [cranfield]="beir:../shared/data/cranfield:test")
for ds in scifact cranfield; do
  extra=""; [ "$ds" = cranfield ] && extra="--allow-empty-docs"
  /usr/bin/time -f "[$ds] index build: %e s wall, %M KB max RSS" $BIN/garen-infer index --dataset "${SPEC[$ds]}" $extra --out "$OUT/idx/$ds" > /dev/null
  for m in bm25 rerank slidegar garen; do
    $BIN/garen-infer run --dataset "${SPEC[$ds]}" $extra --index "$OUT/idx/$ds" --method $m --budget 100 --out "$OUT/runs/$ds-$m" > /dev/null
  done
done
for variant in "explore:--set methods.garen.strategy=explore" "exploit:--set methods.garen.strategy=exploit" \
               "noprop:--set methods.garen.propagation=false" "connectivity:--set methods.garen.navigator=connectivity" \
               "doclevel:--set methods.garen.expansion_unit=document --set methods.garen.k_groups=null"; do
  name=${variant%%:*}; flags=${variant#*:}
  $BIN/garen-infer run --dataset "${SPEC[scifact]}" --index "$OUT/idx/scifact" --method garen --budget 100 $flags --out "$OUT/runs/scifact-garen-$name" > /dev/null
done
$BIN/garen-infer index --dataset "${SPEC[scifact]}" --out "$OUT/idx/scifact" --set index.groups_kmeans={} --set index.groups_random={} > /dev/null
for g in kmeans random; do
  $BIN/garen-infer run --dataset "${SPEC[scifact]}" --index "$OUT/idx/scifact" --method garen --budget 100 --set methods.garen.groups=groups_$g --out "$OUT/runs/scifact-garen-$g" > /dev/null
done
$BIN/python benchmarks/report.py "$OUT"/runs/*/metrics.json
for ds in scifact cranfield; do
  $BIN/python -c "import json,sys; m=json.load(open('$OUT/idx/$ds/manifest.json')); print('$ds', {k: v['info'] for k, v in m['stages'].items()})"
done
