#!/usr/bin/env bash
# Does a trained navigator transfer? GAREN at budget 100 with it, next to GAREN with the zero-shot cosine navigator
# and retrieve-and-rerank (all with cpu-default's cosine reranker), on SciFact test (the recipe's own corpus) and
# Cranfield (never trained on), with paired tests; and the navigator alone on each test split's mined groups.
#
#   bash benchmarks/navigator_transfer.sh NAME SPEC [OUT]
#
# NAME: a label for the navigator (its runs go to OUT/<dataset>/garen-NAME); SPEC: its role spec, e.g.
#   '{backend: embedding, model: checkpoints/cpu-navigator}' (a bi-encoder export) or
#   '{backend: cross-encoder, model: checkpoints/navigator}' (a cross-encoder export).
# OUT: default runs/navigator-transfer; the cosine and rerank runs there are shared by every NAME (a finished run
# is re-read, not run again). Indexes: indexes/scifact and indexes/cranfield (cpu-default; built when missing).
# Mined evaluation folders (for the navigator-alone figures) go to OUT/mined-<dataset>.
# Environment: BIN (default .venv/bin), DATA (default ../shared/data), DATASETS (default "scifact cranfield").
set -euo pipefail
usage="usage: navigator_transfer.sh NAME SPEC [OUT]"
NAME=${1:?$usage}; SPEC=${2:?$usage}; OUT=${3:-runs/navigator-transfer}
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN=${BIN:-.venv/bin}; DATA=${DATA:-../shared/data}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
mkdir -p "$OUT"
say() { echo "$*" | tee -a "$OUT/summary-$NAME.txt"; }

for dataset in ${DATASETS:-scifact cranfield}; do
  spec="beir:$DATA/$dataset:test"; index="indexes/$dataset"; runs="$OUT/$dataset"; mkdir -p "$runs"
  empty=(); [[ $dataset == cranfield ]] && empty=(--allow-empty-docs)  # Cranfield has documents with no text
  [[ -f "$index/manifest.json" ]] || "$BIN/garen-infer" index --dataset "$spec" --out "$index" "${empty[@]}"
  run() {  # run FOLDER METHOD [--set ...]
    local folder=$1 method=$2; shift 2
    [[ -f "$folder/metrics.json" ]] || "$BIN/garen-infer" run --dataset "$spec" --index "$index" --method "$method" \
      --budget 100 --out "$folder" "${empty[@]}" "$@" > "$folder.log" 2>&1
  }
  run "$runs/rerank" rerank
  run "$runs/garen-cosine" garen
  start=$SECONDS
  run "$runs/garen-$NAME" garen --set "models.navigator=$SPEC"
  say "== $dataset ($(date -u +%FT%TZ)); GAREN with $NAME ran in $((SECONDS - start)) s"
  for folder in rerank garen-cosine "garen-$NAME"; do
    say "  $(printf '%-22s' "$folder") $("$BIN/python" -c 'import json, sys; m = json.load(open(sys.argv[1])); g = m.get("gold_group_never_selected_rate"); print("nDCG@10 %.4f  R@100 %.4f  queries %d%s" % (m["nDCG@10"], m["R@100"], m["queries"], "" if g is None else "  gold groups never selected %.3f (never scored %.3f)" % (g, m["gold_group_never_scored_rate"])))' "$runs/$folder/metrics.json")"
  done
  for other in garen-cosine rerank; do
    say "  paired, garen-$NAME vs $other:"
    "$BIN/garen-infer" compare "$runs/garen-$NAME" "$runs/$other" --dataset "$spec" "${empty[@]}" --measures nDCG@10 R@100 | sed 's/^/    /' | tee -a "$OUT/summary-$NAME.txt"
  done
  mined="$OUT/mined-$dataset"
  [[ -f "$mined/manifest.json" ]] || "$BIN/garen-train" mine --dataset "$spec" --index "$index" --out "$mined" --evaluation "${empty[@]}" > "$mined.log" 2>&1
  for navigator in "cosine|{backend: embedding}" "$NAME|$SPEC"; do
    label=${navigator%%|*}; model=${navigator#*|}
    "$BIN/garen-train" evaluate --pairs "$mined/groups.jsonl" --model "$model" > "$OUT/eval-$dataset-$label.json" 2> "$OUT/eval-$dataset-$label.log"
    say "  navigator alone ($label) on every group GAREN scored: $("$BIN/python" -c 'import json, sys; d = json.load(open(sys.argv[1])); m = d["metrics"]; print(json.dumps({"queries": d["queries"], **{k: m[k] for k in ("auc", "R@20", "nDCG@10") if k in m}}))' "$OUT/eval-$dataset-$label.json")"
  done
done
