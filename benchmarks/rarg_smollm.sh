#!/usr/bin/env bash
# RARG, RARG+ and RARG++ driven by SmolLM2-135M-Instruct (transformers, fp32, CPU; preset rarg-cpu) on the first
# N judged SciFact test queries, next to BM25 on the same queries: nDCG@10, R@10 and the agent's ledger per query.
# Usage: bash benchmarks/rarg_smollm.sh [OUT_DIR] [N] [INDEX_DIR]
# The index needs bm25, embeddings and corpus_files (built here; a copy of a cpu-default index only adds the files).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-benchmarks/out/rarg}; N=${2:-5}; INDEX=${3:-$OUT/index}
BIN=${BIN:-.venv/bin}
DATA=${GAREN_DATA:-../shared/data}
SPEC="beir:$DATA/scifact:test"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 GAREN_CACHE_DIR=${GAREN_CACHE_DIR:-$OUT/cache}
# one torch thread: on 2 shared cores, SmolLM2's token-by-token decoding ran several times slower with two
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
$BIN/garen-infer index --dataset "$SPEC" --preset rarg-cpu --out "$INDEX" > /dev/null
for m in bm25 rarg rarg+ rarg++; do
  /usr/bin/time -f "[$m] %e s wall, %M KB max RSS" \
    $BIN/garen-infer run --dataset "$SPEC" --preset rarg-cpu --index "$INDEX" --method "$m" --limit "$N" --out "$OUT/runs/$m" > /dev/null
done
$BIN/python benchmarks/rarg_report.py --dataset "$SPEC" "$OUT"/runs/{bm25,rarg,rarg+,rarg++}
$BIN/python -m garen_infer.agent.transcript "$OUT/runs/rarg+" | head -80
