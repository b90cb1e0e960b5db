"""Offline structures over one corpus, persisted together in one index folder with a manifest."""

from garen_infer.index.folder import IndexFolder

__all__ = ["IndexFolder"]
