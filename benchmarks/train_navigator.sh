#!/usr/bin/env bash
# Train the CPU navigator and pointwise reranker on mined SciFact train pairs, then compare them
# with the CPU default's zero-shot MiniLM on the SciFact test split:
#   (a) navigator alone: AUC and gold-group recall@20 on every group GAREN scored for each test query;
#   (b) GAREN, rerank, SlideGAR and RGS at budget 100: cpu-default vs the trained pointwise reranker (and, for
#       GAREN, the trained navigator), nDCG@10 and R@100 side by side.
#
#   bash benchmarks/train_navigator.sh MINED_TRAIN MINED_TEST INDEX OUT [LIMIT]
#
# MINED_TRAIN: `garen-train mine --dataset beir:DATA:train --index INDEX --out MINED_TRAIN --drop-eval-overlap`
# MINED_TEST:  `garen-train mine --dataset beir:DATA:test --index INDEX --out MINED_TEST --evaluation`
# INDEX: a cpu-default SciFact index; it is copied to OUT/index (stages whose params changed are rebuilt there).
# LIMIT: only the first N test queries in (b) (default: all 300).
# Environment: BIN (the venv's bin folder, default .venv/bin), DATA (default ../shared/data/scifact); for a smoke
# run of the whole chain, FIT_ARGS (extra `garen-train fit` options, e.g. "--trainer.limit_train_batches=2
# --trainer.limit_val_batches=1") and EVAL_LIMIT (only the first N test queries in (a)).
# Everything lands in OUT: training runs and logs, exports (OUT/exports/{reranker,navigator}), evaluations, runs,
# and OUT/summary.txt, which repeats every figure printed here.
set -euo pipefail
usage="usage: train_navigator.sh MINED_TRAIN MINED_TEST INDEX OUT [LIMIT]"
MINED=$(realpath "${1:?$usage}"); TEST=$(realpath "${2:?$usage}"); INDEX=$(realpath "${3:?$usage}")
mkdir -p "${4:?$usage}"; OUT=$(realpath "$4"); LIMIT=${5:-}
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN=${BIN:-$ROOT/.venv/bin}
DATA=$(realpath "${DATA:-$ROOT/../shared/data/scifact}")
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
cd "$ROOT"
mkdir -p "$OUT/exports"
say() { echo "$*" | tee -a "$OUT/summary.txt"; }

fit() {  # fit NAME CONFIG PAIRS: train, export OUT/exports/NAME (kept when already exported)
  local name=$1 config=$2 pairs=$3 start=$SECONDS checkpoint
  if [[ -f "$OUT/exports/$name/manifest.json" ]]; then say "$name: already exported in $OUT/exports/$name"; return; fi
  "$BIN/garen-train" fit --config "$config" --data.init_args.path="$pairs" --trainer.default_root_dir="$OUT/$name" \
    --trainer.logger="[{class_path: lightning.pytorch.loggers.CSVLogger, init_args: {save_dir: '$OUT/$name', name: csv}}]" \
    --trainer.enable_progress_bar=false ${FIT_ARGS:-} > "$OUT/$name.log" 2>&1
  checkpoint=$(ls -t "$OUT/$name"/csv/version_*/checkpoints/last.ckpt | head -n 1)
  "$BIN/garen-train" export --checkpoint "$checkpoint" --out "$OUT/exports/$name" > /dev/null 2>> "$OUT/$name.log"
  say "$name: garen-train fit --config $config --data.init_args.path=$pairs ${FIT_ARGS:-}: trained and exported in $((SECONDS - start)) s"
  say "  validation on held-out train queries, by step: $("$BIN/python" -c '
import csv, json, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r.get("val/auc")]
keys = ("val/auc", "val/R@20", "val/nDCG@10", "val/first_stage_nDCG@10")
print(json.dumps([{"step": int(r["step"]), **{k[4:]: round(float(r[k]), 4) for k in keys if r.get(k)}} for r in rows]))
' "$(dirname "$checkpoint")/../metrics.csv")"
}

say "== training ($(date -u +%FT%TZ))"
fit reranker configs/train/cpu-reranker.yaml "$MINED/documents.jsonl"
fit navigator configs/train/cpu-navigator.yaml "$MINED/groups.jsonl"

say "== (a) navigator on SciFact test groups (every group GAREN scored for each test query${EVAL_LIMIT:+; first $EVAL_LIMIT queries})"
evaluate() {  # evaluate NAME SPEC: one line of metrics
  "$BIN/garen-train" evaluate --pairs "$TEST/groups.jsonl" --model "$2" ${EVAL_LIMIT:+--limit "$EVAL_LIMIT"} > "$OUT/eval-$1.json" 2> "$OUT/eval-$1.log"
  say "  $1: $("$BIN/python" -c 'import json, sys; d = json.load(open(sys.argv[1])); m = d["metrics"]; print(json.dumps({"queries": d["queries"], **{k: m[k] for k in ("auc", "R@20", "nDCG@10") if k in m}}))' "$OUT/eval-$1.json")"
}
evaluate zero-shot-minilm '{backend: embedding}'
evaluate fine-tuned "{backend: embedding, model: $OUT/exports/navigator}"  # a bi-encoder export (cpu-navigator.yaml)

say "== (b) methods at budget 100 on SciFact test${LIMIT:+ (first $LIMIT queries)}"
[[ -d "$OUT/index" ]] || cp -r "$INDEX" "$OUT/index"
"$BIN/garen-infer" index --dataset "beir:$DATA:test" --out "$OUT/index" > "$OUT/index.log" 2>&1
TRAINED_RERANKER=(--set models.reranker.mode=pointwise --set models.reranker.backend=cross-encoder --set "models.reranker.model=$OUT/exports/reranker")
TRAINED_NAVIGATOR=(--set "models.navigator={backend: embedding, model: $OUT/exports/navigator}")
run() {  # run METHOD SETUP [--set ...]: one run folder, one line of metrics
  local method=$1 setup=$2; shift 2
  local folder="$OUT/runs/$method-$setup"
  "$BIN/garen-infer" run --dataset "beir:$DATA:test" --index "$OUT/index" --method "$method" --budget 100 \
    ${LIMIT:+--limit "$LIMIT"} --out "$folder" "$@" > "$folder.log" 2>&1
  say "  $(printf '%-8s %-28s' "$method" "$setup") $("$BIN/python" -c 'import json, sys; m = json.load(open(sys.argv[1])); print("nDCG@10 %.4f  R@100 %.4f  queries %d  s/query %.2f" % (m["nDCG@10"], m["R@100"], m["queries"], m.get("wall_seconds_per_query", float("nan"))))' "$folder/metrics.json")"
}
mkdir -p "$OUT/runs"
for method in garen rerank slidegar rgs; do
  run "$method" cpu-default
  run "$method" trained-reranker "${TRAINED_RERANKER[@]}"
done
run garen trained-navigator "${TRAINED_NAVIGATOR[@]}"  # the navigator alone, behind the cosine reranker
run garen trained-reranker+navigator "${TRAINED_RERANKER[@]}" "${TRAINED_NAVIGATOR[@]}"
say "== done ($(date -u +%FT%TZ)); figures above are in $OUT/summary.txt"
