"""An index built before a stage gained a field: neutral new fields keep the stage, a field whose default changed
what the stage builds (``LEGACY`` on its params class) makes the stage rebuild instead of being trusted."""

from dataclasses import asdict

from garen_infer.index.embeddings import EmbeddingParams
from garen_infer.index.folder import completed_params
from garen_infer.index.groups import GroupParams
from garen_infer.index.proximity_graph import ProximityGraphParams


def _recorded_without(params_type, field: str) -> dict:
    return {k: v for k, v in asdict(params_type()).items() if k != field}


def test_a_neutral_new_field_reads_as_its_default():
    old = _recorded_without(EmbeddingParams, "chunk_size")
    assert completed_params(EmbeddingParams, old) == asdict(EmbeddingParams())


def test_a_new_field_that_changed_the_build_reads_as_its_legacy_value():
    old = _recorded_without(ProximityGraphParams, "start")
    assert completed_params(ProximityGraphParams, old)["start"] == "first"  # document 0, as graphs were built then
    assert completed_params(ProximityGraphParams, old) != asdict(ProximityGraphParams())  # so it is rebuilt
    old = _recorded_without(GroupParams, "cap_rule")
    assert completed_params(GroupParams, old)["cap_rule"] == "exceeding"


def test_a_recorded_value_always_wins():
    recorded = asdict(ProximityGraphParams(start="medoid"))
    assert completed_params(ProximityGraphParams, recorded) == recorded
