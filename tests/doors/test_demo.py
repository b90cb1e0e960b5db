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


def test_the_trace_says_what_changes_and_folds_repeated_iterations():
    """GAREN's own trace on the 200-document world of tests/methods: explore for t = 1..4 (the same ten groups,
    round robin), then exploit; iterations that read the same are one line, the spans cover t = 1..8."""
    from test_garen import MEMBERS, drive, make_garen, ring_neighbours, world_state

    from garen_infer.doors.demo import trace_lines

    garen = make_garen(ring_neighbours(), MEMBERS)
    state = world_state()
    drive(garen.search(state), {d: float(d % 7) for d in range(200)},
          {f"G{g}: group {g}": g / 20 for g in range(20)}, [])
    lines = trace_lines(state.trace["iterations"], [f"group {g}" for g in range(20)])
    assert lines[:2] == [
        "t=1    explore  scored 20 new groups; 10 documents from 10 groups: group 19; group 18; group 17 (+7 more)",
        "t=2..4 explore  scored  0 new groups; 10 documents from the same 10 groups",
    ]
    assert lines[2:] == [
        "t=5    exploit  scored  0 new groups; 10 documents from 2 groups, none new, first: group 19",
        "t=6    exploit  scored  0 new groups; 10 documents from 3 groups, none new, first: group 18",
        "t=7    exploit  scored  0 new groups; 10 documents from 2 groups, none new, first: group 16",
        "t=8    exploit  scored  0 new groups; 10 documents from 2 groups, none new, first: group 14",
    ]


def test_groups_reached_for_the_first_time_are_named():
    """With K_g = 2 each iteration scores two more groups: the new ones are named, the ones seen before are not."""
    from test_garen import MEMBERS, drive, make_garen, ring_neighbours, world_state

    from garen_infer.doors.demo import trace_lines

    garen = make_garen(ring_neighbours(), MEMBERS, k_groups=2)
    state = world_state()
    drive(garen.search(state), {d: float(d % 7) for d in range(200)},
          {f"G{g}: group {g}": g / 20 for g in range(20)}, [])
    lines = trace_lines(state.trace["iterations"], [f"group {g}" for g in range(20)])
    assert lines[1] == "t=2 explore  scored  2 new groups; 10 documents from 4 groups, 2 new: group 5; group 4"
    assert lines[4] == "t=5 exploit  scored  2 new groups; 10 documents from 1 group, 1 new: group 10"
    assert len(lines) == 8  # every iteration reads differently: none folded
