"""garen_infer: frozen-model inference for reasoning-intensive retrieval.

The packages are layers. A module imports modules of its own unit and of units on lower lines, never higher ones;
units on one line stand side by side and import none of each other. A unit is a package (``running``), a root
module (``errors``), or inside ``index/`` a sub-package (``index.tree``); ``index`` is index/'s own modules but for
the folder that opens them all (``index.folder``: folder.py and __init__.py). ``tests/project/test_layering.py`` reads
this table and checks every import, ``TYPE_CHECKING`` ones included. Bottom to top:

    errors, version: the one exception type every refusal raises; the release number
    settings: typed fields, every configuration is checked against them
    shipped: where the package's own presets and checkpoints lie, whatever the working folder
    data: corpora, queries, judgments and their loaders
    storage: atomic writes, append logs, writer locks, folder kinds, TREC files
    llm: models by role: backends, encoders, prompts, answer parsing, cache, ledger
    agent, index.lexical: RARG's shell agent; BM25 with its analyzers
    index: the stage registry, vectors and graphs, the first stage
    index.grouping: GAREN's groups stage: partitions, summaries (written by an LLM), the groups format
    index.tree: LATTICE's semantic tree stage, built from grouping's partitions and summaries
    index.folder: an index folder, which opens whatever its stages built
    methods, evaluation: the retrieval methods; metrics, reachability, cost
    configuration: presets, run configurations and shards, checked against every typed config below
    running: the scheduler and its engine queues, the runner, merges, repeated seeds
    report, testing: tables and figures over run folders; scripted models for tests of methods
    doors: cli, api, pyterrier, demo
    __init__, __main__: garen_infer.Index / Retriever, python -m garen_infer

``import garen_infer`` stays cheap: the API loads on first use.
"""

from garen_infer.errors import GarenError
from garen_infer.version import __version__

__all__ = ["GarenError", "Index", "Retriever", "__version__"]


def __getattr__(name: str):
    if name in ("Index", "Retriever"):
        from garen_infer.doors import api

        return getattr(api, name)
    raise AttributeError(f"module 'garen_infer' has no attribute '{name}'")
