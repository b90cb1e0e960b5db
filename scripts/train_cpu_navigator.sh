#!/usr/bin/env bash
# Train the navigator of the cpu-trained preset and export it where that preset reads it:
#
#   make cpu-navigator                                  (or: bash scripts/train_cpu_navigator.sh [DATA])
#
# DATA: a BEIR folder with train and test splits (default ../shared/data/scifact, the recipe's data). Four steps;
# each keeps what an earlier run of it finished:
#   1. index the corpus with cpu-default                     -> indexes/<name>        (INDEX=...)
#   2. mine GAREN's traversal on the train queries, leaving out any query the test split repeats
#                                                            -> mined/<name>-train    (MINED=...)
#   3. fit configs/train/cpu-navigator.yaml                  -> runs/train/cpu-navigator
#   4. export the last checkpoint                            -> checkpoints/cpu-navigator (OUT=...; an existing
#      export is kept: delete it to train again)
# Then: garen-infer run --preset cpu-trained --dataset ... --index ... --method garen
# Environment: BIN (default .venv/bin); FIT_ARGS, extra `garen-train fit` options (a smoke run of the chain:
# FIT_ARGS="--trainer.limit_train_batches=2 --trainer.limit_val_batches=1" OUT=/somewhere/else).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN=${BIN:-.venv/bin}
DATA=${1:-../shared/data/scifact}
NAME=$(basename "$DATA")
INDEX=${INDEX:-indexes/$NAME}
MINED=${MINED:-mined/$NAME-train}
OUT=${OUT:-checkpoints/cpu-navigator}
JOB=runs/train/cpu-navigator
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
[[ -d "$DATA" ]] || { echo "train_cpu_navigator.sh: no BEIR folder at $DATA" >&2; exit 2; }
if [[ -f "$OUT/manifest.json" ]]; then
  echo "$OUT: already exported (delete it to train again)"; exit 0
fi
"$BIN/garen-infer" index --dataset "beir:$DATA:test" --out "$INDEX"
"$BIN/garen-train" mine --dataset "beir:$DATA:train" --index "$INDEX" --out "$MINED" --drop-eval-overlap
start=$SECONDS
"$BIN/garen-train" fit --config configs/train/cpu-navigator.yaml --data.init_args.path="$MINED/groups.jsonl" \
  --trainer.default_root_dir="$JOB" ${FIT_ARGS:-}
checkpoint=$(ls -t "$JOB"/csv/version_*/checkpoints/last.ckpt | head -n 1)
"$BIN/garen-train" export --checkpoint "$checkpoint" --out "$OUT"
echo "trained in $((SECONDS - start)) s; use it with --preset cpu-trained"
