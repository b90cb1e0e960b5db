"""One line on what pip would install for the wheel from its own metadata (`pip install --dry-run --report
FILE`): how many distributions, the versions of the heavy ones, and whether torch came as the CUDA build (it
does unless the CPU build is pinned, as requirements-cpu.txt pins it).

    python benchmarks/resolution_summary.py REPORT.json
"""

from __future__ import annotations

import json
import sys

report = json.load(open(sys.argv[1]))
versions = {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in report["install"]}
cuda = sorted(name for name in versions if name.startswith(("nvidia-", "cuda-")))
torch = f"the CUDA build with {len(cuda)} CUDA libraries" if cuda else "a CPU build"
print(f"[metadata] the wheel's own metadata ([cpu]) resolves to {len(versions)} distributions: "
      f"torch {versions.get('torch')} ({torch}), transformers {versions.get('transformers')}, "
      f"faiss-cpu {versions.get('faiss-cpu')}")
