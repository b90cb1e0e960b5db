"""Retrieval methods, one module each, registered by name. Each is a per-query generator over typed requests
(see ``garen_infer.llm.requests``) so it reads like its paper's pseudocode."""

from garen_infer.methods.base import METHODS, Method, QueryState, get_method

__all__ = ["METHODS", "Method", "QueryState", "get_method"]
