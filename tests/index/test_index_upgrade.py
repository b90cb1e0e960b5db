"""An index folder of another format is refused in one line that says how to rebuild it, and ``--force`` rebuilds
it; within the format, a params field the manifest does not record reads as its default."""

import json
import shutil
from dataclasses import asdict

import pytest

from garen_infer.errors import GarenError
from garen_infer.index.folder import FORMAT, IndexFolder, completed_params
from garen_infer.index.proximity_graph import ProximityGraphParams
from garen_infer.llm.embeddings import EmbeddingParams


@pytest.fixture
def older_index(tiny_index, tmp_path):
    """A copy of the tiny index whose manifest says it was written in the format before this one."""
    path = tmp_path / "index"
    shutil.copytree(tiny_index.path, path)
    manifest = json.loads((path / "manifest.json").read_text())
    (path / "manifest.json").write_text(json.dumps({**manifest, "format": FORMAT - 1}))
    return path


def test_an_index_of_another_format_is_refused_in_one_line(older_index, tiny_dataset, index_config):
    message = (f"{older_index / 'manifest.json'}: index format {FORMAT - 1} is not {FORMAT}, the one this release "
               f"reads; rebuild it with 'garen-infer index --force' and the preset that built it")
    with pytest.raises(GarenError) as refused:
        IndexFolder.open(older_index, tiny_dataset)
    assert str(refused.value) == message
    with pytest.raises(GarenError) as refused:  # a build without --force does not touch it either
        IndexFolder.build(tiny_dataset, older_index, index_config, log=lambda *_: None)
    assert str(refused.value) == message


def test_force_rebuilds_an_index_of_another_format(older_index, tiny_dataset, index_config):
    said = []
    IndexFolder.build(tiny_dataset, older_index, index_config, force=True, log=said.append)
    assert "[index] knn_graph: building" in said
    assert IndexFolder.open(older_index, tiny_dataset).manifest["format"] == FORMAT


def test_a_field_the_manifest_does_not_record_reads_as_its_default():
    recorded = {k: v for k, v in asdict(EmbeddingParams()).items() if k != "chunk_size"}
    assert completed_params(EmbeddingParams, recorded) == asdict(EmbeddingParams())


def test_a_recorded_value_always_wins():
    recorded = asdict(ProximityGraphParams(start="first"))
    assert completed_params(ProximityGraphParams, recorded) == recorded
