"""The wheel a user installs: built from a copy of the checkout's package files (nothing is written into the
checkout), it carries the presets and the version, license and entry points, so an installed `garen-infer` finds
`cpu-default` without a checkout. The full smoke test (a fresh virtualenv, `garen-infer demo` from the wheel) is
benchmarks/wheel_smoke.sh: it installs the dependencies and runs the demo, minutes rather than seconds."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

import garen_infer

REPO = Path(__file__).resolve().parents[2]
BUILD_INPUTS = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE", "CITATION.cff", "CHANGELOG.md",
                "garen_infer", "garen_train", "configs")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    source = tmp_path_factory.mktemp("source")
    for name in BUILD_INPUTS:
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy2
        copy(REPO / name, source / name,
             **({"ignore": shutil.ignore_patterns("__pycache__")} if copy is shutil.copytree else {}))
    dist = tmp_path_factory.mktemp("dist")
    # the way `python -m build` goes, source distribution first and the wheel from it (so the sdist must hold
    # all the wheel needs), through the same setuptools hooks; this environment's setuptools, so no registry
    build_sdist = f"from setuptools import build_meta; print(build_meta.build_sdist({str(dist)!r}))"
    built = subprocess.run([sys.executable, "-c", build_sdist], cwd=source, check=True, capture_output=True,
                           text=True)
    sdist = dist / built.stdout.split()[-1]
    with tarfile.open(sdist) as packed:
        packed.extractall(dist / "unpacked", filter="data")
    [unpacked] = (dist / "unpacked").iterdir()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                    "-q", "-w", str(dist), "."],
                   cwd=unpacked, check=True, capture_output=True, text=True)
    [path] = dist.glob("*.whl")
    return zipfile.ZipFile(path)


def test_the_wheel_carries_every_preset(wheel):
    names = set(wheel.namelist())
    presets = sorted(p.relative_to(REPO / "configs").as_posix() for p in (REPO / "configs").rglob("*.yaml"))
    assert presets and "cpu-default.yaml" in presets and any(p.startswith("bench/") for p in presets)
    for preset in presets:
        packaged = f"garen_infer/configs/{preset}"
        assert packaged in names, packaged
        assert wheel.read(packaged) == (REPO / "configs" / preset).read_bytes()
    # inside the package, not a top-level folder of site-packages
    assert not any(n.startswith("configs/") for n in names)


def test_the_wheel_is_garen_ir_at_the_one_version_with_its_license_and_commands(wheel):
    version = garen_infer.__version__
    dist_info = f"garen_ir-{version}.dist-info"
    metadata = wheel.read(f"{dist_info}/METADATA").decode()
    assert (
        "Name: garen-ir\n" in metadata
        and f"Version: {version}\n" in metadata
        and "License-Expression: Apache-2.0\n" in metadata
    )
    assert "Apache License" in wheel.read(f"{dist_info}/licenses/LICENSE").decode()
    entry_points = wheel.read(f"{dist_info}/entry_points.txt").decode()
    assert (
        "garen-infer = garen_infer.doors.cli:main" in entry_points
        and "garen-train = garen_train.cli:main" in entry_points
    )
    assert yaml.safe_load((REPO / "CITATION.cff").read_text())["version"] == version  # the citation's copy agrees
    assert f"## {version} " in (REPO / "CHANGELOG.md").read_text()


def test_an_installed_package_reads_its_presets_from_inside_itself(wheel, tmp_path):
    """The wheel's garen_infer, unpacked alone (no checkout beside it), resolves cpu-default to its own copy."""
    wheel.extractall(tmp_path)
    probe = (
        "from garen_infer.configuration.presets import CONFIG_DIR, preset_path; print(CONFIG_DIR); "
        "print(preset_path('cpu-default'))"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)}, check=True,
                         capture_output=True, text=True).stdout.split()
    assert out == [str(tmp_path / "garen_infer" / "configs"),
                   str(tmp_path / "garen_infer" / "configs" / "cpu-default.yaml")]


def test_presets_lists_what_the_installed_package_ships(wheel, tmp_path):
    wheel.extractall(tmp_path)
    listed = subprocess.run([sys.executable, "-m", "garen_infer", "presets"], cwd=tmp_path,
                            env={"PYTHONPATH": str(tmp_path)}, check=True, capture_output=True, text=True)
    listing = listed.stdout.splitlines()
    assert listing[0] == f"Shipped with garen-ir, in {tmp_path / 'garen_infer' / 'configs'}:"
    cpu_default = "The embedded default: runs offline on a CPU with models that ship on PyPI."
    assert [line.split(None, 1) for line in listing if line.startswith("  cpu-default ")] == [
        ["cpu-default", cpu_default]
    ]
    assert any(line.split()[:1] == ["bench/cpu-default.yaml"] for line in listing)
    assert any(line.split()[:1] == ["train/cpu-navigator.yaml"] for line in listing)
