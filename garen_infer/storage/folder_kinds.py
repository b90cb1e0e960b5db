"""Which command owns a folder, so that no command writes into another's.

Each kind of output folder is recognised by what its command writes first:

    index folder    manifest.json with "stages"                         garen-infer index
    run folder      config.json with "method" (or seed-0/config.json)   garen-infer run, a bench cell,
                                                                        a mine's traversal/
    mined folder    manifest.json of format garen-mined-pairs/..., or   garen-train mine
                    the traversal/ run folder a mine starts with
    export folder   manifest.json of kind "garen-train export"          garen-train export

Every writer of such a folder takes the folder's writer lock naming its kind (``garen_infer/storage/writer_lock.py``),
and the lock refuses a folder that is another kind's, before and again after it is taken. A command that
replaces its folder as a whole (an export) also refuses a folder that holds files it did not write.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from garen_infer.errors import GarenError

COMMANDS = {"index folder": "garen-infer index", "run folder": "garen-infer run", "mined folder": "garen-train mine",
            "export folder": "garen-train export"}
LOCK_NAME = ".garen-writer.lock"  # the writer lock's file (writer_lock.py): in every kind of folder, owned by none
EXPORT_KIND = "garen-train export"  # an export manifest's "kind" (llm/exported_models.py reads it as KIND)
MINED_FORMAT = "garen-mined-pairs/"  # the mined manifest's format, before its version


def _json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _is_run(folder: Path) -> bool:
    return "method" in _json(folder / "config.json")


def kind_of(folder: str | Path) -> str | None:
    """The kind of output folder ``folder`` is, or None (absent, empty, or no command's)."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    manifest = _json(folder / "manifest.json")
    if manifest.get("kind") == EXPORT_KIND:
        return "export folder"
    if str(manifest.get("format", "")).startswith(MINED_FORMAT) or _is_run(folder / "traversal"):
        return "mined folder"
    if "stages" in manifest:
        return "index folder"
    if _is_run(folder) or _is_run(folder / "seed-0"):
        return "run folder"
    return None


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def refuse_foreign(folder: str | Path, kind: str) -> None:
    """Refuse to write ``kind`` into a folder that another command owns, and a run into a folder holding files
    that are no run's (a run resumes from what its folder holds, so it must hold only what a run wrote)."""
    found = kind_of(folder)
    if found is not None and found != kind:
        raise GarenError(f"{folder}: is {_a(found)} (written by '{COMMANDS[found]}'); writing {_a(kind)} there would "
                         f"break it: choose another folder")
    if found is None and kind == "run folder":
        stray = (
            sorted(p.name for p in Path(folder).iterdir() if not _a_runs_own(p.name))
            if Path(folder).is_dir()
            else []
        )
        if stray:
            raise GarenError(f"{folder}: is not a run folder and is not empty (it holds {', '.join(stray[:3])}"
                             f"{', ...' if len(stray) > 3 else ''}); choose a new or empty --out folder")


RUN_FILES = ("config.json", "trace.jsonl", "run.trec", "metrics.json")


def _a_runs_own(name: str) -> bool:
    """A file a run writes (its results, the writer lock, an atomic write's temporary) or a seed's folder."""
    return name in RUN_FILES or name.startswith(".") or re.fullmatch(r"seed-\d+", name) is not None


def refuse_unowned(folder: str | Path, kind: str) -> None:
    """For a command that replaces its folder as a whole: refuse a folder holding files it did not write."""
    refuse_foreign(folder, kind)
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise GarenError(f"{folder}: is a file, not a folder; choose a new or empty folder")
    if kind_of(folder) != kind and folder.is_dir() and any(p.name != LOCK_NAME for p in folder.iterdir()):
        raise GarenError(f"{folder}: holds files that '{COMMANDS[kind]}' did not write; it replaces its "
                         f"folder as a whole, so it would delete them: choose a new or empty folder")
