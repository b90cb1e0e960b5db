"""The install files agree: the package's own dependencies admit both stacks' pins (requirements-cpu.txt, and
requirements-gpu.txt with vLLM's), and faiss comes from one build at a time (the `cpu` or the `gpu` extra).
Resolving requirements-gpu.txt against the real vLLM wheel needs the registry:
tests/engines/test_gpu_requirements.py."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
FAISS_BUILDS = {"faiss-cpu", "faiss-gpu"}
LEFT_TO_VLLM = {"torch", "transformers", "numpy"}  # vLLM pins them (numpy through numba)


def pins(path: Path) -> dict[str, Requirement]:
    lines = (line.split("#")[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return {canonicalize_name(r.name): r for r in (Requirement(line) for line in lines if line)}


def project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_faiss_builds_are_alternatives_in_extras_never_a_core_dependency():
    core = {canonicalize_name(Requirement(r).name) for r in project()["dependencies"]}
    extras = {
        name: {canonicalize_name(Requirement(r).name) for r in reqs}
        for name, reqs in project()["optional-dependencies"].items()
    }
    assert not core & FAISS_BUILDS
    assert extras["cpu"] & FAISS_BUILDS == {"faiss-cpu"} and extras["gpu"] & FAISS_BUILDS == {"faiss-gpu"}
    assert FAISS_BUILDS & set(pins(REPO / "requirements-cpu.txt")) == {"faiss-cpu"}
    assert FAISS_BUILDS & set(pins(REPO / "requirements-gpu.txt")) == {"faiss-gpu"}


def test_both_stacks_pins_satisfy_the_packages_own_requirements():
    core = {canonicalize_name(Requirement(r).name): Requirement(r) for r in project()["dependencies"]}
    gpu = pins(REPO / "requirements-gpu.txt")
    assert gpu["vllm"].specifier == Requirement("vllm==0.33.0").specifier and not LEFT_TO_VLLM & set(gpu)
    for path, stack in ((REPO / "requirements-cpu.txt", pins(REPO / "requirements-cpu.txt")),
                        (REPO / "requirements-gpu.txt", gpu)):
        for name, requirement in core.items():
            pinned = stack.get(name)
            if pinned is not None and pinned.specifier:
                version = next(iter(pinned.specifier)).version
                assert requirement.specifier.contains(version), (
                    f"{path.name} pins {pinned} but the package needs {requirement}"
                )
    # vLLM 0.33.0's pins (its wheel's requirements): torch 2.14.0, transformers < 5.21, numpy < 2.4 (numba 0.65)
    for pinned in ("torch==2.14.0", "transformers==5.20.2", "numpy==2.3.5"):
        requirement = Requirement(pinned)
        assert core[requirement.name].specifier.contains(next(iter(requirement.specifier)).version), pinned


def test_the_readme_installs_cpu_only_in_one_command_with_the_pinned_torch():
    """The README's one command for a CPU-only install takes torch from PyTorch's CPU index at the version
    requirements-cpu.txt pins (a plain install on Linux would resolve the CUDA build), and the `cpu` extra."""
    import re
    import shlex

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    commands = [line for line in readme.splitlines() if line.startswith("pip install --extra-index-url")]
    assert len(commands) == 1, commands
    words = shlex.split(commands[0])
    assert words[words.index("--extra-index-url") + 1] == "https://download.pytorch.org/whl/cpu"
    torch = pins(REPO / "requirements-cpu.txt")["torch"]
    [pinned] = [w for w in words if w.startswith("torch==")]
    assert re.fullmatch(rf"torch=={re.escape(next(iter(torch.specifier)).version)}\+cpu", pinned), (pinned, torch)
    assert "garen-ir[cpu]" in words and "cpu" in project()["optional-dependencies"]
