#!/usr/bin/env bash
# Adapt GAREN's CPU navigator to a corpus with no judgments, and export it where the cpu-adapted preset reads it:
#
#   make adapt-navigator DATASET=../shared/data/cranfield      (or: bash scripts/adapt_navigator.sh DATA)
#
# DATA: a BEIR folder (only its corpus.jsonl is read) or a corpus.jsonl file. Four steps; each keeps what an earlier
# run of it finished, and each shows a progress bar with its own time left:
#   1. index the corpus with cpu-default (from corpus.jsonl alone)   -> indexes/<name>             (INDEX=...;
#      ALLOW_EMPTY_DOCS=1 keeps documents of no text, as Cranfield's)
#   2. write QUERIES queries from it (STYLE, default mixed: extractive forms; KEEP=beyond-window keeps only
#      queries whose source BM25 ranks beyond GAREN's first window) and mine GAREN's traversal of them
#                                                                    -> mined/<name>-synthetic     (MINED=...)
#   3. fit configs/train/cpu-navigator.yaml on those pairs           -> runs/train/adapted-<name>  (JOB=...)
#   4. export the last checkpoint                                    -> checkpoints/cpu-adapted    (OUT=...; an
#      existing export is kept: delete it to adapt again)
# Then: garen-infer run --preset cpu-adapted --dataset ... --index ... --method garen
#       (another OUT: --set models.navigator.model=OUT)
# Environment: BIN (default .venv/bin); QUERIES (default 500); STYLE (default mixed) and KEEP (default all):
# mine-synthetic's --style and --keep (docs/design/training.md has what each did on Cranfield);
# NON_REGRESSION=1: hold out 30% of the synthetic queries (not 10%) and export the zero-shot navigator unless the
# adapted one ranks those better beyond noise (objective.non_regression; docs/design/training.md);
# ALLOW_EMPTY_DOCS=1; MINE_ARGS, extra `garen-train mine-synthetic` options (e.g. --writer generator --set
# 'models.generator={...}'); FIT_ARGS, extra `garen-train fit` options. The estimate printed first uses the
# rates measured on 2 cores shared with a load of ~15 (docs/design/training.md); set SECONDS_PER_QUERY,
# SECONDS_PER_STEP and SECONDS_FIXED to this machine's. On shared cores, OMP_NUM_THREADS=1 keeps torch's
# threads from spinning against each other (a Cranfield mine that finished no query in 9 minutes with two
# threads ran 300 in 2.4 minutes with one).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN=${BIN:-.venv/bin}
DATA=${1:?usage: adapt_navigator.sh DATA (a BEIR folder or a corpus.jsonl)}
CORPUS=$DATA; [[ -d "$DATA" ]] && CORPUS=$DATA/corpus.jsonl
[[ -f "$CORPUS" ]] || { echo "adapt_navigator.sh: no corpus.jsonl at $DATA" >&2; exit 2; }
NAME=$(basename "$DATA" .jsonl); [[ $NAME == corpus ]] && NAME=$(basename "$(dirname "$CORPUS")")
INDEX=${INDEX:-indexes/$NAME}
MINED=${MINED:-mined/$NAME-synthetic}
OUT=${OUT:-checkpoints/cpu-adapted}
QUERIES=${QUERIES:-500}
STYLE=${STYLE:-mixed}
KEEP=${KEEP:-all}
EMPTY_DOCS=(); [[ ${ALLOW_EMPTY_DOCS:-0} == 1 ]] && EMPTY_DOCS=(--allow-empty-docs)
JOB=${JOB:-runs/train/adapted-$NAME}
GUARD=(); TRAIN_TENTHS=9
if [[ ${NON_REGRESSION:-0} == 1 ]]; then
  GUARD=(--model.init_args.objective.non_regression=true --data.init_args.val_fraction=0.3); TRAIN_TENTHS=7
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if [[ -f "$OUT/manifest.json" ]]; then
  echo "$OUT: already exported (delete it to adapt again)"; exit 0
fi
# cpu-navigator.yaml: batches of 8 lists, 10% of the queries held out for validation (30% with the guard), one epoch
steps=$(( (QUERIES * TRAIN_TENTHS / 10 + 7) / 8 ))
awk -v name="$NAME" -v q="$QUERIES" -v s="$steps" -v rq="${SECONDS_PER_QUERY:-0.5}" -v rs="${SECONDS_PER_STEP:-32}" \
    -v fixed="${SECONDS_FIXED:-300}" 'BEGIN {
  printf "adapting to %s: %d queries to mine, %d training steps; estimate %.0f min (%.1f s/query, %.0f s/step, %.0f s to load, validate and export)\n",
         name, q, s, (q * rq + s * rs + fixed) / 60, rq, rs, fixed }'
start=$SECONDS
[[ -f "$INDEX/manifest.json" ]] ||
  "$BIN/garen-infer" index --dataset "jsonl:$CORPUS" --out "$INDEX" "${EMPTY_DOCS[@]}"
"$BIN/garen-train" mine-synthetic --corpus "$CORPUS" --index "$INDEX" --out "$MINED" --queries "$QUERIES" \
  --style "$STYLE" --keep "$KEEP" --scores none "${EMPTY_DOCS[@]}" ${MINE_ARGS:-}
"$BIN/garen-train" fit --config configs/train/cpu-navigator.yaml --data.init_args.path="$MINED/groups.jsonl" \
  --trainer.default_root_dir="$JOB" "${GUARD[@]}" ${FIT_ARGS:-}
checkpoint=$(ls -t "$JOB"/csv/version_*/checkpoints/last.ckpt | head -n 1)
"$BIN/garen-train" export --checkpoint "$checkpoint" --out "$OUT"
echo "adapted in $((SECONDS - start)) s; use it with --preset cpu-adapted$([[ $OUT != checkpoints/cpu-adapted ]] && echo " --set models.navigator.model=$OUT")"
