"""requirements-gpu.txt resolves together with the real vLLM 0.33.0 wheel's requirements (pip's resolver, a dry run:
nothing is installed, no CUDA is needed) and names everything the project imports.

Runs with the engine tests because it needs the package registry (pip downloads the wheels' metadata); without it
the test is skipped with pip's reason."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import tomllib

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from .engine_support import REPO

# import name -> distribution, where they differ beyond "_" vs "-"
DISTRIBUTION_OF = {
    "Stemmer": "pystemmer", "diskannpy": "diskannpy-rust", "faiss": "faiss-gpu", "igraph": "python-igraph",
    "sklearn": "scikit-learn", "yaml": "pyyaml", "pytrec_eval": "pytrec-eval-terrier",
}
NOT_IMPORTED = {"ripgrep": "the rg binary the RARG agent runs"}


def opt_in_distributions() -> set[str]:
    """What the opt-in extras bring (pyterrier, irds, ...: doors a GPU run does not need), not the faiss builds."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    return {
        canonicalize_name(Requirement(r).name)
        for name, reqs in extras.items()
        if name not in ("cpu", "gpu")
        for r in reqs
    }


def third_party_imports() -> set[str]:
    """Top-level modules garen_infer and garen_train import (anywhere: lazy imports too), stdlib left out."""
    names = set()
    for path in [*(REPO / "garen_infer").rglob("*.py"), *(REPO / "garen_train").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and not n.startswith("garen")}


@pytest.fixture(scope="module")
def resolved(tmp_path_factory) -> dict:
    """pip's report of `pip install -r requirements-gpu.txt '.[gpu]'`, resolved for this Python on Linux x86-64."""
    work = tmp_path_factory.mktemp("gpu-requirements")
    project = work / "project"  # the project's metadata only: pyproject.toml and the package folders it names
    for package in ("garen_infer", "garen_train"):
        (project / package).mkdir(parents=True)
        (project / package / "__init__.py").write_text("", encoding="utf-8")
    shutil.copy(REPO / "garen_infer" / "__init__.py", project / "garen_infer")  # the version is read from it
    shutil.copy(REPO / "pyproject.toml", project)
    shutil.copy(REPO / "README.md", project)
    report = work / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report),
         "-r", str(REPO / "requirements-gpu.txt"), f"{project}[gpu]"],
        capture_output=True, text=True, timeout=900,
    )
    if done.returncode != 0 and any(s in done.stderr for s in ("connection", "Connection", "Name or service",
                                                               "Temporary failure")):
        pytest.skip(f"the package registry cannot be reached: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr[-3000:]
    return {
        canonicalize_name(item["metadata"]["name"]): item["metadata"]
        for item in json.loads(report.read_text())["install"]
    }


def test_the_gpu_requirements_resolve_with_vllms_own_pins(resolved):
    vllm = resolved["vllm"]
    assert vllm["version"] == "0.33.0"
    environment = {**default_environment(), "extra": ""}
    for line in vllm["requires_dist"]:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate(environment):
            continue
        chosen = resolved[canonicalize_name(requirement.name)]["version"]
        assert requirement.specifier.contains(chosen, prereleases=True), f"{requirement} but {chosen} was resolved"
    assert resolved["torch"]["version"] == "2.14.0"  # vLLM's CUDA torch, not moved by the project
    assert "faiss-cpu" not in resolved and "faiss-gpu" in resolved  # one faiss build only


def test_the_gpu_requirements_name_everything_the_project_imports(resolved):
    opt_in = opt_in_distributions()
    distributions = {name: canonicalize_name(DISTRIBUTION_OF.get(name, name)) for name in third_party_imports()}
    missing = sorted(name for name, dist in distributions.items() if dist not in resolved and dist not in opt_in)
    assert not missing, f"imported but not installed by requirements-gpu.txt: {missing}"
    assert all(canonicalize_name(name) in resolved for name in NOT_IMPORTED)
