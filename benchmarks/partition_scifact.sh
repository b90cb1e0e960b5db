#!/usr/bin/env bash
# Issue 9 figures: GAREN on SciFact test at budget 100 (App. C.2 protocol: every construction has Leiden's number of
# groups) with Leiden, learned soft (overlapping), k-means and random groups, cpu-default models; the soft
# partition's training and export cost; partition quality and App. C.3 counts from one report command; and the
# check that a disjoint export (anchor 100, one group per document) reproduces the Leiden run.
# Usage: [DATA=../shared/data] [LIMIT=N] bash benchmarks/partition_scifact.sh [OUT_DIR] [PREBUILT_CPU_DEFAULT_SCIFACT_INDEX]
# LIMIT: GAREN on the first N test queries only (a quick look; the protocol is all 300)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-benchmarks/out/partition}
BIN=${BIN:-.venv/bin}
SPEC="beir:${DATA:-../shared/data}/scifact:test"   # DATA: where the shared corpora live
IDX=$OUT/idx/scifact
export HF_HUB_OFFLINE=1 GAREN_CACHE_DIR=${GAREN_CACHE_DIR:-$OUT/cache}
mkdir -p "$OUT/idx" "$OUT/runs"
if [ ! -d "$IDX" ] && [ -n "${2:-}" ]; then cp -r "$2" "$IDX"; fi   # embedding SciFact costs minutes; copying costs none
$BIN/garen-infer index --dataset $SPEC --out "$IDX" --set index.groups_kmeans={} --set index.groups_random={} > /dev/null

FIT="$BIN/garen-train fit --config configs/train/partition-dmon.yaml --data.init_args.index=$IDX --trainer.enable_progress_bar=false"
/usr/bin/time -f "soft fit: %U s user, %S s sys, %e s wall, %M KB max RSS" \
  $FIT --trainer.default_root_dir="$OUT/fit" --trainer.callbacks.init_args.dirpath="$OUT/fit" > "$OUT/fit.log" 2>&1
/usr/bin/time -f "soft export: %U s user, %S s sys, %e s wall, %M KB max RSS" \
  $BIN/garen-train export --checkpoint "$OUT/fit/last.ckpt" --index "$IDX" --dataset $SPEC > "$OUT/export.json"

for g in groups groups_soft groups_kmeans groups_random; do
  /usr/bin/time -f "garen on $g: %e s wall" \
    $BIN/garen-infer run --dataset $SPEC --index "$IDX" --method garen --budget 100 ${LIMIT:+--limit $LIMIT} --set methods.garen.groups=$g --out "$OUT/runs/garen-$g" > /dev/null
done
$BIN/garen-train partition-report --index "$IDX" --stage groups groups_soft groups_kmeans groups_random \
  --run groups="$OUT/runs/garen-groups" --run groups_soft="$OUT/runs/garen-groups_soft" \
  --run groups_kmeans="$OUT/runs/garen-groups_kmeans" --run groups_random="$OUT/runs/garen-groups_random" | tee "$OUT/report.md"

# a disjoint export of a model anchored to the Leiden groups must give the Leiden run, byte for byte
$FIT --trainer.max_epochs=1 --model.init_args.anchor=100 --trainer.default_root_dir="$OUT/fit-anchored" \
  --trainer.callbacks.init_args.dirpath="$OUT/fit-anchored" > "$OUT/fit-anchored.log" 2>&1
$BIN/garen-train export --checkpoint "$OUT/fit-anchored/last.ckpt" --index "$IDX" --dataset $SPEC --stage groups_disjoint --max-groups-per-doc 1 > /dev/null
$BIN/garen-infer run --dataset $SPEC --index "$IDX" --method garen --budget 100 ${LIMIT:+--limit $LIMIT} --set methods.garen.groups=groups_disjoint --out "$OUT/runs/garen-groups_disjoint" > /dev/null
cmp "$OUT/runs/garen-groups/run.trec" "$OUT/runs/garen-groups_disjoint/run.trec" && echo "disjoint export: run.trec identical to the Leiden run"
