"""scripts/gpu_check.sh: one line per check, a summary, and an exit status that says whether all passed. The full
dry run takes about five minutes on a loaded 2-core machine (the navigator's fit is most of it), so CI runs its
fastest check; the whole dry run is `scripts/gpu_check.sh --cpu-dry-run`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LINE = re.compile(r"^CHECK (\w+): (PASS|FAIL)( \w+=\S+)+$")


def gpu_check(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(REPO)}
    return subprocess.run([str(REPO / "scripts" / "gpu_check.sh"), *args], capture_output=True, text=True, env=env, timeout=600)


def test_the_dry_run_of_the_transformers_check_passes_in_the_checks_format():
    done = gpu_check("--cpu-dry-run", "--only", "transformers_backend")
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert len(lines) == 2, lines  # the check's line and the summary, nothing else (was: three blank lines first)
    assert LINE.match(lines[0]) and lines[0].startswith("CHECK transformers_backend: PASS device=cpu dtype=bfloat16 max_dp_yes=")
    assert re.match(r"^SUMMARY: 1 of 1 passed on cpu \(dry run\) in \d+ s$", lines[-1])


def cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.skipif(cuda(), reason="on a GPU machine the real check runs instead")
def test_without_a_gpu_the_real_check_fails_in_its_own_line_with_a_nonzero_status():
    done = gpu_check("--only", "transformers_backend")
    assert done.returncode == 1 and done.stdout.strip() == "CHECK cuda: FAIL reason=no_CUDA_device hint=--cpu-dry-run"
    assert LINE.match(done.stdout.strip())
