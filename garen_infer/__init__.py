"""garen_infer: frozen-model inference for reasoning-intensive retrieval.

Layers, bottom to top (each a sub-package): ``data`` -> ``index`` -> ``llm`` -> ``methods`` -> ``runner`` -> the
doors: ``cli``, the Python API (``Index``, ``Retriever``, in ``api``) and ``pyterrier``. ``import garen_infer`` stays
cheap: the API loads on first use.
"""

from garen_infer.errors import GarenError

__version__ = "0.1.0"
__all__ = ["GarenError", "Index", "Retriever"]


def __getattr__(name: str):
    if name in ("Index", "Retriever"):
        from garen_infer.doors import api

        return getattr(api, name)
    raise AttributeError(f"module 'garen_infer' has no attribute '{name}'")
