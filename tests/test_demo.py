"""The demo's closing hints."""

from garen_infer.demo import next_steps
from garen_infer.methods.base import METHODS


def test_next_steps_list_every_registered_method():
    line = next(line for line in next_steps().splitlines() if line.strip().startswith("Methods"))
    assert line.split(":", 1)[1].strip().split(", ") == list(METHODS)
