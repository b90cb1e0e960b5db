#!/usr/bin/env bash
# RGS next to retrieve-and-rerank and SlideGAR on SciFact test, CPU default, Reranker@100/300/500.
#
#   benchmarks/rgs_budgets.sh            # main table: each method with the cpu-default preset
#   EXTRA=1 benchmarks/rgs_budgets.sh    # also: RR/SlideGAR from the dense first stage, RGS seeded from BM25,
#                                        # and RGS as the paper states it (one seed, no early stop)
#
# Runs are resumable folders; a finished one is only re-read. Environment: DATASET, INDEX, RUNS, GAREN_CACHE_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

CLI=${CLI:-.venv/bin/garen-infer}
PY=${PY:-.venv/bin/python}
DATASET=${DATASET:-beir:../shared/data/scifact:test}
INDEX=${INDEX:-indexes/scifact}
RUNS=${RUNS:-runs/rgs-budgets}
BUDGETS=${BUDGETS:-100 300 500}
export GAREN_CACHE_DIR=${GAREN_CACHE_DIR:-runs/rgs-budgets/cache}

# 1. The index: cpu-default's params for the stages these three methods read, and nothing else (other stages the
#    folder holds are kept as they are; stages already built with these params are not rebuilt).
PRESET=$(mktemp --suffix=.yaml)
trap 'rm -f "$PRESET"' EXIT
$PY - "$PRESET" <<'EOF'
import sys, yaml
from garen_infer.configuration.presets import load_preset
preset = load_preset("cpu-default")
preset["index"] = {k: preset["index"][k] for k in ("bm25", "embeddings", "knn_graph", "proximity_graph")}
open(sys.argv[1], "w").write(yaml.safe_dump(preset))
EOF
$CLI index --dataset "$DATASET" --preset "$PRESET" --out "$INDEX" > /dev/null

# 2. The runs.
run() {  # run <folder> <method> <budget> [--set ...]
  local out=$1 method=$2 budget=$3; shift 3
  echo "== $method @$budget -> $out $*" >&2
  $CLI run --dataset "$DATASET" --index "$INDEX" --method "$method" --budget "$budget" --out "$out" "$@" > /dev/null
}
folders=()
for budget in $BUDGETS; do
  for method in rerank slidegar rgs; do
    run "$RUNS/scifact-$method-$budget" "$method" "$budget"
    folders+=("$RUNS/scifact-$method-$budget")
  done
done
if [[ -n "${EXTRA:-}" ]]; then
  for budget in $BUDGETS; do
    for method in rerank slidegar; do
      run "$RUNS/scifact-$method-dense-$budget" "$method" "$budget" --set first_stage.kind=dense
      folders+=("$RUNS/scifact-$method-dense-$budget")
    done
    run "$RUNS/scifact-rgs-bm25seeds-$budget" rgs "$budget" --set methods.rgs.first_stage=run
    run "$RUNS/scifact-rgs-paper-$budget" rgs "$budget" --set methods.rgs.follow=paper
    folders+=("$RUNS/scifact-rgs-bm25seeds-$budget" "$RUNS/scifact-rgs-paper-$budget")
  done
fi

# 3. The table.
$PY - "$INDEX" "${folders[@]}" <<'EOF'
import json, sys
from pathlib import Path
info = json.loads((Path(sys.argv[1]) / "manifest.json").read_text())["stages"]["proximity_graph"]["info"]
print(f"proximity graph: R={info['degree']} build {info['seconds']} s, out-degree min/mean/max "
      f"{info['degree_min']}/{info['degree_mean']}/{info['degree_max']}, {info['edges']} edges")
print(f"| {'run':32} | budget | nDCG@10 | R@100 | requests/q | budget used/q | wall s/q |")
print(f"|{'-' * 34}|-------:|--------:|------:|-----------:|--------------:|---------:|")
for folder in map(Path, sys.argv[2:]):
    m, c = json.loads((folder / "metrics.json").read_text()), json.loads((folder / "config.json").read_text())
    wall = m.get("wall_seconds_per_query")
    print(f"| {folder.name:32} | {c['budget']:6} | {m['nDCG@10']:.4f} | {m['R@100']:.4f} | {m['mean_requests']:10.2f} | "
          f"{m['mean_budget_used']:13.2f} | {'resumed' if wall is None else f'{wall:.4f}':>8} |")
EOF
