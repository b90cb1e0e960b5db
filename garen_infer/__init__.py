"""garen_infer: frozen-model inference for reasoning-intensive retrieval.

Layers, bottom to top (each a sub-package): ``data`` -> ``index`` -> ``llm`` -> ``methods`` -> ``runner`` -> ``cli``.
"""

__version__ = "0.1.0"
