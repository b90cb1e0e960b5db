#!/usr/bin/env bash
# `garen-infer bench --plan slurm`, checked end to end: plans a two-cell bench (bm25 on two datasets, a
# BM25-only index built first), submits the array job and then its collect job with the line the script's last
# comment gives, waits for both, and checks that every cell finished, that the report holds both, and that
# every log is under the runs folder. Prints the job ids, the order the tasks ran in and the wall time.
#
#   bash benchmarks/slurm_check.sh [WORK]        # default WORK: runs/slurm-check (git-ignored)
#   SLURM=real  on a cluster: the real sbatch (default when sbatch is on the PATH and SLURM is unset)
#   SLURM=fake  here: benchmarks/fake_slurm.py stands in for sbatch (bare environments, other folders, the
#               last submitted job first), then runs the queue
#   DATA_A / DATA_B    the two dataset specs (default: ../shared/data's SciFact and Cranfield test splits)
#   SBATCH_ARGS        options a real cluster needs on every job, e.g. "--partition=debug --time=00:20:00"
#
# Run it from the checkout with its environment active (the jobs activate the environment that plans them).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
WORK=$(realpath -m "${1:-runs/slurm-check}")
DATA_A=${DATA_A:-beir:$REPO/../shared/data/scifact:test}
DATA_B=${DATA_B:-beir:$REPO/../shared/data/cranfield:test}
if [ -z "${SLURM:-}" ]; then SLURM=$(command -v sbatch >/dev/null && echo real || echo fake); fi
read -r -a EXTRA <<< "${SBATCH_ARGS:-}"
rm -rf "$WORK" && mkdir -p "$WORK"
cd "$WORK"
cat > bm25-only.yaml <<EOF
# bm25 alone: the index needs one stage, so building it takes seconds
index: {bm25: {variant: bm25s, k1: 1.2, b: 0.75}}
first_stage: {kind: bm25, depth: 1000}
methods: {bm25: {}}
EOF
cat > bench.yaml <<EOF
preset: bm25-only.yaml
build_index: true
methods: [bm25]
datasets:
  a: {spec: "$DATA_A", index: indexes/a, allow_empty_docs: true}
  b: {spec: "$DATA_B", index: indexes/b, allow_empty_docs: true}
runs: runs
report: report
figure_formats: [png]
EOF
start=$(date +%s)
garen-infer bench --config bench.yaml --plan slurm --no-cache > bench.sh   # builds the two indexes first
if [ "$SLURM" = fake ]; then
  export FAKE_SLURM_DIR=$WORK/fake-slurm FAKE_SLURM_KEEP=HF_HUB_OFFLINE,PYTHONPATH,GAREN_CACHE_DIR
  python "$REPO/benchmarks/fake_slurm.py" install "$WORK/bin"
  export PATH=$WORK/bin:$PATH
fi
array=$(sbatch --parsable ${EXTRA[@]+"${EXTRA[@]}"} bench.sh)  # an empty array is "unbound" to older bash
array=${array%%;*}  # "id;cluster" on a federated cluster
collect=$(sed -n 's/^#   \(sbatch --dependency=.*\)$/\1/p' bench.sh | sed "s/<this array job id>/$array/")
collect_id=$(eval "${collect/sbatch /sbatch --parsable ${EXTRA[*]} }")
echo "[slurm-check] $SLURM Slurm: array job $array (2 cells), collect job ${collect_id%%;*} after it"
if [ "$SLURM" = fake ]; then
  python "$REPO/benchmarks/fake_slurm.py" drain
  sed 's/ log=.*//; s/^/[slurm-check] ran: /' "$FAKE_SLURM_DIR/order.log"
else
  while squeue -h -j "$array,${collect_id%%;*}" 2>/dev/null | grep -q .; do sleep 10; done
fi
python - "$WORK" <<'EOF'
import json, sys
from pathlib import Path
work = Path(sys.argv[1])
results = json.loads((work / "report" / "results.json").read_text())["datasets"]
cells = {name: [c["label"] for c in d["cells"]] for name, d in results.items()}
skipped = {name: d["skipped"] for name, d in results.items() if d["skipped"]}
logs = sorted(p.name for p in (work / "runs" / "slurm-logs").iterdir())
stray = sorted(p.name for p in work.iterdir() if p.name.startswith("slurm-"))
print(f"[slurm-check] report cells: {cells}; logs: {logs}")
assert cells == {"a": ["bm25"], "b": ["bm25"]} and not skipped, (cells, skipped)
assert len(logs) == 3 and not stray, (logs, stray)
EOF
echo "[slurm-check] passed: both cells and the collect job ran; report in $WORK/report;" \
     "$(( $(date +%s) - start )) s wall"
