"""LATTICE's semantic tree and its builders (bottom-up, top-down, node descriptions)."""
