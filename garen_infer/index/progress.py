"""Progress for an index stage that runs as one long call with nothing to count (DiskANN's build, a clustering
pass): a bar that shows the time elapsed, refreshed every second, so a build that runs for minutes does not look
hung. Stages that can count their work use tqdm's counting bars directly."""

from __future__ import annotations

import threading
from contextlib import contextmanager

from tqdm.auto import tqdm


@contextmanager
def elapsed_bar(description: str):
    """Show ``description: <elapsed>`` while the block runs; yields the bar (``set_postfix_str`` names the step)."""
    bar = tqdm(desc=description, bar_format="{desc}: {elapsed}{postfix}")
    done = threading.Event()

    def tick():
        while not done.wait(1.0):
            bar.refresh()

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        yield bar
    finally:
        done.set()
        ticker.join()
        bar.close()
