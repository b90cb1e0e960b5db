#!/usr/bin/env bash
# GAREN per group construction on SciFact test at budget 100 (App. C.2 protocol: every construction has Leiden's number of
# groups) with Leiden, learned soft (overlapping), k-means and random groups, cpu-default models; the soft
# partition's training and export cost; partition quality and App. C.3 counts from one report command; and the
# check that a disjoint export (anchor 100, one group per document) reproduces the Leiden run.
# Usage: [DATA=../shared/data] [LIMIT=N] [NAVIGATOR=DIR] bash benchmarks/partition_scifact.sh [OUT_DIR] [PREBUILT_CPU_DEFAULT_SCIFACT_INDEX]
# LIMIT: GAREN on the first N test queries only (a quick look; the protocol is all 300)
# NAVIGATOR: a cross-encoder navigator exported by `garen-train export` (e.g. from benchmarks/train_navigator.sh);
#   the four constructions are then run a second time with it. With cpu-default alone the navigator, the reranker
#   and the k-NN graph are one MiniLM cosine, so no grouping can show what navigation adds.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-benchmarks/out/partition}
BIN=${BIN:-.venv/bin}
SPEC="beir:${DATA:-../shared/data}/scifact:test"   # DATA: where the shared corpora live
IDX=$OUT/idx/scifact
export HF_HUB_OFFLINE=1 GAREN_CACHE_DIR=${GAREN_CACHE_DIR:-$OUT/cache}
mkdir -p "$OUT/idx" "$OUT/runs/cosine"
if [ ! -d "$IDX" ] && [ -n "${2:-}" ]; then cp -r "$2" "$IDX"; fi   # embedding SciFact costs minutes; copying costs none
$BIN/garen-infer index --dataset $SPEC --out "$IDX" --set index.groups_kmeans={} --set index.groups_random={} > /dev/null

FIT="$BIN/garen-train fit --config configs/train/partition-dmon.yaml --data.init_args.index=$IDX --trainer.enable_progress_bar=false"
/usr/bin/time -o "$OUT/fit.time" -f "soft fit: %U s user, %S s sys, %e s wall, %M KB max RSS" \
  $FIT --trainer.default_root_dir="$OUT/fit" --trainer.callbacks.init_args.dirpath="$OUT/fit" > "$OUT/fit.log" 2>&1
cat "$OUT/fit.time"
/usr/bin/time -f "soft export: %U s user, %S s sys, %e s wall, %M KB max RSS" \
  $BIN/garen-train export --checkpoint "$OUT/fit/last.ckpt" --index "$IDX" --dataset $SPEC > "$OUT/export.json"

STAGES=(groups groups_soft groups_kmeans groups_random)
garen_on_every_construction() {  # NAME [--set ...]: GAREN on each groups stage, then the quality + C.3 report
  local name=$1; shift
  local runs=()
  for g in "${STAGES[@]}"; do
    /usr/bin/time -f "garen ($name) on $g: %U s user, %S s sys, %e s wall, %M KB max RSS" \
      $BIN/garen-infer run --dataset $SPEC --index "$IDX" --method garen --budget 100 ${LIMIT:+--limit $LIMIT} \
      --set methods.garen.groups=$g "$@" --out "$OUT/runs/$name/garen-$g" > /dev/null
    runs+=(--run "$g=$OUT/runs/$name/garen-$g")
  done
  echo "== GAREN, navigator: $name"
  $BIN/garen-train partition-report --index "$IDX" --stage "${STAGES[@]}" "${runs[@]}" | tee "$OUT/report-$name.md"
  for g in "${STAGES[@]:1}"; do  # each construction against Leiden, query by query (paired tests)
    $BIN/garen-infer compare --dataset $SPEC "$OUT/runs/$name/garen-groups" "$OUT/runs/$name/garen-$g" | tee -a "$OUT/compare-$name.txt"
  done
  # do the documents navigation finds beyond BM25's top 100 reach the top 10, and are they relevant there?
  $BIN/python benchmarks/top10_sources.py --dataset $SPEC --first-stage "$OUT/runs/bm25/run.trec" \
    "$OUT/runs/$name"/garen-{groups,groups_soft,groups_kmeans,groups_random} | tee "$OUT/top10-$name.md"
}
$BIN/garen-infer run --dataset $SPEC --index "$IDX" --method bm25 ${LIMIT:+--limit $LIMIT} --out "$OUT/runs/bm25" > /dev/null
garen_on_every_construction cosine
if [ -n "${NAVIGATOR:-}" ]; then
  garen_on_every_construction trained-navigator --set models.navigator.backend=cross-encoder --set "models.navigator.model=$NAVIGATOR"
fi

# a disjoint export of a model anchored to the Leiden groups must give the Leiden run, byte for byte
$FIT --trainer.max_epochs=1 --model.init_args.anchor=100 --trainer.default_root_dir="$OUT/fit-anchored" \
  --trainer.callbacks.init_args.dirpath="$OUT/fit-anchored" > "$OUT/fit-anchored.log" 2>&1
$BIN/garen-train export --checkpoint "$OUT/fit-anchored/last.ckpt" --index "$IDX" --dataset $SPEC --stage groups_disjoint --max-groups-per-doc 1 > /dev/null
$BIN/garen-infer run --dataset $SPEC --index "$IDX" --method garen --budget 100 ${LIMIT:+--limit $LIMIT} --set methods.garen.groups=groups_disjoint --out "$OUT/runs/cosine/garen-groups_disjoint" > /dev/null
cmp "$OUT/runs/cosine/garen-groups/run.trec" "$OUT/runs/cosine/garen-groups_disjoint/run.trec" && echo "disjoint export: run.trec identical to the Leiden run"
