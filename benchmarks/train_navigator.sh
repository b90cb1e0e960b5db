#!/usr/bin/env bash
# Train the CPU scorers on mined SciFact train pairs, export them, and print their validation figures next to the
# CPU default's zero-shot MiniLM cosine (and the first-stage order) on the same held-out training queries; with a
# test-split mine, also zero-shot vs fine-tuned navigator on the test queries.
#
#   bash benchmarks/train_navigator.sh MINED_TRAIN OUT [MINED_TEST]
#
# MINED_TRAIN: a `garen-train mine` folder of the train split (groups.jsonl, documents.jsonl), e.g.
#   garen-train mine --dataset beir:../shared/data/scifact:train --index indexes/scifact --out mined/scifact-train --drop-eval-overlap
# MINED_TEST (optional): the test split mined with --evaluation (never trained on).
# OUT: runs, checkpoints and exports (OUT/exports/cpu-reranker, OUT/exports/cpu-navigator).
# Steps: configs/train/cpu-reranker.yaml (query, document), export; configs/train/cpu-navigator.yaml (query, group
# summary) starting from the reranker export, export; then `garen-train evaluate` for the comparison table.
set -euo pipefail
MINED=${1:?usage: train_navigator.sh MINED_TRAIN OUT [MINED_TEST]}
OUT=${2:?usage: train_navigator.sh MINED_TRAIN OUT [MINED_TEST]}
TEST=${3:-}
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN=${BIN:-$ROOT/.venv/bin}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mkdir -p "$OUT/exports"
cd "$ROOT"

fit() {  # fit NAME CONFIG PAIRS [overrides...]: train, export OUT/exports/NAME, print the seconds it took
  local name=$1 config=$2 pairs=$3; shift 3
  local start=$SECONDS
  "$BIN/garen-train" fit --config "$config" --data.init_args.path="$pairs" --trainer.default_root_dir="$OUT/$name" \
    --trainer.logger="[{class_path: lightning.pytorch.loggers.CSVLogger, init_args: {save_dir: '$OUT/$name', name: csv}}]" \
    --trainer.enable_progress_bar=false "$@" > "$OUT/$name.log" 2>&1
  local checkpoint
  checkpoint=$(ls -t "$OUT/$name"/csv/version_*/checkpoints/last.ckpt | head -n 1)
  "$BIN/garen-train" export --checkpoint "$checkpoint" --out "$OUT/exports/$name" > /dev/null
  echo "$name: trained and exported in $((SECONDS - start)) s ($checkpoint)"
}

fit cpu-reranker configs/train/cpu-reranker.yaml "$MINED/documents.jsonl"
fit cpu-navigator configs/train/cpu-navigator.yaml "$MINED/groups.jsonl" --model.init_args.model="$OUT/exports/cpu-reranker"

evaluate() {  # evaluate PAIRS SPEC [options...]: one JSON line of metrics
  "$BIN/garen-train" evaluate --pairs "$1" --model "$2" "${@:3}" 2>/dev/null | "$BIN/python" -c \
    'import json, sys; d = json.load(sys.stdin); m = d["metrics"]; print(json.dumps({"queries": d["queries"], **{k: m[k] for k in ("auc", "R@20", "nDCG@10", "first_stage_nDCG@10") if k in m}}))'
}
held_out() {  # the validation queries of the config's own split, with its candidate cap
  "$BIN/python" - "$1" <<'EOF'
import sys, yaml
data = yaml.safe_load(open(sys.argv[1]))["data"]["init_args"]
print(f"--held-out --val-fraction {data['val_fraction']} --seed {data['seed']}" + (f" --max-negatives {data['max_negatives']}" if data.get("max_negatives") else ""))
EOF
}
echo
echo "held-out SciFact train queries (the configs' validation split):"
for role in reranker:documents navigator:groups; do
  name=${role%%:*} pairs="$MINED/${role#*:}.jsonl"
  split=$(held_out "configs/train/cpu-$name.yaml")
  # shellcheck disable=SC2086
  echo "  $name zero-shot MiniLM cosine: $(evaluate "$pairs" '{backend: embedding}' $split)"
  # shellcheck disable=SC2086
  echo "  $name fine-tuned:              $(evaluate "$pairs" "{backend: cross-encoder, model: $OUT/exports/cpu-$name}" $split)"
done
if [[ -n "$TEST" ]]; then
  echo "SciFact test queries (mined with --evaluation; every scored group of every query):"
  echo "  navigator zero-shot MiniLM cosine: $(evaluate "$TEST/groups.jsonl" '{backend: embedding}')"
  echo "  navigator fine-tuned:              $(evaluate "$TEST/groups.jsonl" "{backend: cross-encoder, model: $OUT/exports/cpu-navigator}")"
fi
