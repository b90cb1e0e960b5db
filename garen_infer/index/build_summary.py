"""What ``garen-infer index`` prints once a build is done: one line per stage with what this build did to it
(built, rebuilt, kept), the seconds it took and its size on disk; ``--json`` prints the same facts with each
stage's manifest entry (params and info) as one JSON object."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from garen_infer.index.open_index import OpenIndex


def stage_bytes(folder: Path, stage: str) -> int:
    """Bytes on disk of a stage's files: its folder (``bm25/``) or its files named after it (``embeddings.npy``)."""
    total = 0
    for top in [folder / stage, *folder.glob(f"{stage}.*")]:
        files = top.rglob("*") if top.is_dir() else [top]
        total += sum(f.stat().st_size for f in files if f.is_file())
    return total


def size_text(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def summary(index: OpenIndex) -> dict:
    """The facts behind the table: ``index`` is the index folder that ``IndexFolder.build`` returned."""
    stages = {}
    for name, entry in index.manifest["stages"].items():
        action, seconds = index.build_actions.get(name, ("kept", None))
        stages[name] = {"action": action, "seconds": seconds, "bytes": stage_bytes(index.path, name), **entry}
    return {"index": str(index.path), "corpus": index.manifest["corpus"], "stages": stages}


def summary_table(facts: dict) -> str:
    corpus = facts["corpus"]
    lines = [f"{facts['index']}: {corpus['name']}, {corpus['doc_count']:,} documents"]
    width = max([len("stage"), *map(len, facts["stages"])])
    lines.append(f"  {'stage':<{width}}  {'':<7}  {'time':>9}  {'size':>9}")
    for name, stage in facts["stages"].items():
        time = "-" if stage["seconds"] is None else f"{stage['seconds']:.1f} s"
        lines.append(f"  {name:<{width}}  {stage['action']:<7}  {time:>9}  {size_text(stage['bytes']):>9}")
    spent = sum(s["seconds"] or 0 for s in facts["stages"].values())
    lines.append(f"  {'total':<{width}}  {'':<7}  {spent:>7.1f} s  "
                 f"{size_text(sum(s['bytes'] for s in facts['stages'].values())):>9}")
    return "\n".join(lines)
