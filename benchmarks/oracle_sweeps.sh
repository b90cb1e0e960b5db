#!/usr/bin/env bash
# The oracle sweeps, a SIMULATION (the oracle backend plays the reranker): every method against reranker quality on
# SciFact and Cranfield test at budget 100, GAREN's navigator real (MiniLM) and simulated; then SciFact with the
# simulated navigator's sigma held at 0.3 and at 1.0 while the reranker's varies.
#
#   bash benchmarks/oracle_sweeps.sh [OUT]        # environment: DATA (../shared/data), IDX (indexes: scifact/, cranfield/), PY
#
# Run folders are resumable; a finished one is only re-read. Indexes: cpu-default with every stage.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/oracle-sweeps}
DATA=${DATA:-../shared/data}
IDX=${IDX:-indexes}
PY=${PY:-.venv/bin/python}
SIGMAS="0 0.1 0.2 0.3 0.4 0.5 0.6 0.75 1.0"
METHODS="bm25 rerank slidegar rgs garen"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

$PY benchmarks/oracle_sweep.py --dataset "beir:$DATA/scifact:test" --index "$IDX/scifact" --out "$OUT/scifact" \
    --methods $METHODS --navigators embedding oracle --sigmas $SIGMAS
$PY benchmarks/oracle_sweep.py --dataset "beir:$DATA/cranfield:test" --allow-empty-docs --index "$IDX/cranfield" \
    --out "$OUT/cranfield" --methods $METHODS --navigators embedding oracle --sigmas $SIGMAS
for nav_sigma in 0.3 1.0; do
  $PY benchmarks/oracle_sweep.py --dataset "beir:$DATA/scifact:test" --index "$IDX/scifact" --out "$OUT/scifact-navsigma-$nav_sigma" \
      --methods rerank slidegar garen --navigators oracle --navigator-sigma $nav_sigma --sigmas $SIGMAS
done
