"""Named points where a test may kill this process, to prove that work killed there resumes to the same files.

``GAREN_KILL_AT=<point>`` sends SIGKILL to this process the first time it passes ``fault_point("<point>")``, and
``GAREN_KILL_AT=<point>#<n>`` the n-th time. The points sit inside every index stage: between the chunks of the
embedding stage and the batches of the k-NN search, around every atomic write (``write:<name>`` once the
temporary is complete, ``renamed:<name>`` just after it replaced the real name). Unset, a point costs one lookup.
"""

from __future__ import annotations

import os
import signal
from collections import Counter

KILL_ENV = "GAREN_KILL_AT"
_passed: Counter = Counter()


def fault_point(name: str) -> None:
    spec = os.environ.get(KILL_ENV)
    if not spec:
        return
    point, _, nth = spec.partition("#")
    if point != name:
        return
    _passed[name] += 1
    if _passed[name] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
