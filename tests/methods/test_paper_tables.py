"""Every paper-table bench file (configs/bench/garen-table-N.yaml) runs as its CPU stand-in on the tiny
corpus, so the files never rot: the same rows and method options, with cpu-default's MiniLM roles in place of
the GPU models (a row's ``models.*`` overrides and its own GPU preset name those models and are left out), at
budget 8."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import REPO

from garen_infer.llm.cache import NoCache
from garen_infer.methods.base import METHODS
from garen_infer.report.bench import run_bench
from garen_infer.report.bench_config import load_bench_config, parse_bench_config

TABLES = sorted((REPO / "configs" / "bench").glob("garen-table-*.yaml"))


def stand_in(path, data_dir, index, tmp):
    raw = yaml.safe_load(path.read_text())
    def cpu_row(row: dict) -> dict:
        own = [s for s in row.get("set", []) if not s.startswith("models.")]
        return {**{k: v for k, v in row.items() if k != "preset"}, "set": own}

    rows = [cpu_row(m) if isinstance(m, dict) else m for m in raw["methods"]]
    raw.update(preset="cpu-default", budgets=[8], datasets={"tiny": {"spec": f"beir:{data_dir}", "index": str(index)}},
               methods=rows, build_index=False, skip_unavailable=True, significance={"permutations": 200, "seed": 0},
               runs=str(tmp / "runs"), report=str(tmp / "report"))
    return parse_bench_config(raw, path)


def test_every_table_has_a_bench_file():
    assert [p.name for p in TABLES] == [f"garen-table-{n}.yaml" for n in range(1, 9)]


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.stem)
def test_the_bench_file_says_what_it_reproduces(path):
    header = path.read_text().split("\npreset:", 1)[0]
    table = path.stem.removeprefix("garen-")
    assert header.startswith(f"# GAREN Table {table.split('-')[1]}:")
    for word in ("Rows:", "Needs:", "Time:", "CPU stand-in"):
        assert word in header
    load_bench_config(path)  # the file as shipped is valid


@pytest.fixture(scope="module")
def grouped_index(full_index, tiny_dataset, tmp_path_factory):
    """The full tiny index with Table 8's K-means and random groups (extractive summaries, as cpu-default)."""
    import shutil

    from garen_infer.index.folder import IndexFolder
    from garen_infer.index.stages import IndexConfig

    path = tmp_path_factory.mktemp("grouped") / "index"
    shutil.copytree(full_index.path, path)
    stages = IndexConfig.from_dict({"groups_kmeans": {}, "groups_random": {}})
    return IndexFolder.build(tiny_dataset, path, stages, log=lambda *_: None)


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.stem)
def test_the_cpu_stand_in_runs_every_row(path, beir_dir, grouped_index, tmp_path):
    config = stand_in(path, beir_dir, grouped_index.path, tmp_path)
    run_bench(config, NoCache(), log=lambda *_: None)
    runs = {p.parent.name.split("@")[0] for p in (tmp_path / "runs").rglob("metrics.json")}
    labels = {e.label for e in config.method_entries(list(METHODS))}
    # REPAIR's planner and LATTICE's generator traversal must write text: no CPU role plays them
    assert all(label.startswith(("repair-reasoning", "lattice")) for label in labels - runs)
    for folder in (tmp_path / "runs").rglob("metrics.json"):
        assert json.loads(folder.read_text())["queries"] == 4

