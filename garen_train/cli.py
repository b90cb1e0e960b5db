"""``garen-train``: training jobs. None is implemented yet; see the project's open issues."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    print("garen-train: no training job is implemented yet (navigator LoRA and soft partitions are planned)", file=sys.stderr)
    return 2
