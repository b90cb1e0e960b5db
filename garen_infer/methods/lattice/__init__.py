"""LATTICE (Gupta et al., 2025): LLM-guided search over a semantic tree, one module per part.

- ``method``: the per-query search (Algorithm 4) and its settings;
- ``search_tree``: one query's view of the tree (reached nodes, frontier, path relevance);
- ``slates``: what one scoring call shows the model and how its answer is read;
- ``calibration``: the latent-score fit across slates;
- ``fusion``: LATTICE++, LATTICE fused with BM25 and dense retrieval.

The tree itself is built at index time (``garen_infer.index.tree.semantic_tree``).
"""

from garen_infer.methods.lattice.method import Lattice, LatticeConfig

__all__ = ["Lattice", "LatticeConfig"]
