"""The wheel carries the presets: ``configs/`` stays at the checkout's top level (where users and docs name it) and
is copied to ``garen_infer/configs`` when the package is built, so an installed ``garen-infer`` finds
``cpu-default`` without a checkout. Everything else about the package is in pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PRESETS = Path(__file__).resolve().parent / "configs"


class BuildWithPresets(build_py):
    def run(self):
        super().run()
        target = Path(self.build_lib) / "garen_infer" / "configs"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(PRESETS, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildWithPresets})
