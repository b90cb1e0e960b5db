"""The demo's closing hints, and its folder: one per installed copy of the package."""

from garen_infer.doors.demo import next_steps
from garen_infer.methods.base import METHODS


def test_next_steps_list_every_registered_method():
    line = next(line for line in next_steps().splitlines() if line.strip().startswith("Methods"))
    assert line.split(":", 1)[1].strip().split(", ") == list(METHODS)


def test_the_demo_folder_is_one_per_installed_copy(monkeypatch, tmp_path):
    import garen_infer.doors.demo as demo

    monkeypatch.setenv("GAREN_CACHE_DIR", str(tmp_path))
    here = demo.default_folder()
    assert here.parent == tmp_path and here.name.startswith("demo-") and here == demo.default_folder()
    monkeypatch.setattr(demo, "__file__", str(tmp_path / "another-checkout" / "garen_infer" / "doors" / "demo.py"))
    assert demo.default_folder() != here  # another clone's demo is not resumed
