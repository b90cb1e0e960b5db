"""Every method ranks as it did before the house was rebuilt: the order of each run (query, document, rank) on the
tiny corpus, with the CPU default's models and with the simulated oracle, equals the order the code of 3e099c6
wrote (``tests/fixtures/rankings``, kept by ``benchmarks/identical_runs.py --before 3e099c6 --write-rankings``).
A change meant to reorder a ranking rewrites its fixture the same way and says why in its commit."""

from __future__ import annotations

from pathlib import Path

import pytest

from garen_infer.configuration.presets import load_preset, run_config_from
from garen_infer.llm.cache import NoCache
from garen_infer.running.session import execute

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rankings"
ORACLE = {"backend": "oracle", "sigma": 0.3, "seed": 7}
MODEL_SETS = {"cpu-default": None, "oracle": {"reranker": ORACLE, "navigator": ORACLE}}
CELLS = sorted((path.parent.name, path.stem) for path in FIXTURES.glob("*/*.tsv"))


def order(run_file: Path) -> str:
    rows = (line.split() for line in run_file.read_text().splitlines() if line.strip())
    return "".join(f"{qid}\t{doc}\t{rank}\n" for qid, _, doc, rank, *_ in rows)


def test_every_method_has_its_ranking_under_both_model_sets():
    assert {m for _, m in CELLS} >= {"bm25", "rerank", "slidegar", "garen", "rgs", "lattice", "lattice++"}
    assert {s for s, _ in CELLS} == set(MODEL_SETS)


@pytest.mark.parametrize("models, method", CELLS)
def test_a_method_ranks_as_before(models, method, tiny_dataset, full_index, tmp_path):
    preset = load_preset("cpu-default")
    if MODEL_SETS[models] is not None:
        preset["models"] = MODEL_SETS[models]
    execute(tiny_dataset, full_index, run_config_from(preset, method, 10), tmp_path, cache=NoCache(),
            log=lambda *_: None)
    assert order(tmp_path / "run.trec") == (FIXTURES / models / f"{method}.tsv").read_text()
