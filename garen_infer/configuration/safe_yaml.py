"""YAML as presets and ``--set`` values are read: safe tags only, and aliases (``*name``, ``<<: *name``) allowed
as the presets use them, up to a bounded expansion. A few lines of nested aliases ("billion laughs") stand for
billions of values; they are refused before anything expands them, instead of exhausting memory later."""

from __future__ import annotations

import yaml

MAX_VALUES = 100_000  # values a document may stand for once its aliases are expanded; a preset has a few hundred


class BoundedLoader(yaml.SafeLoader):
    def get_single_node(self):
        node = super().get_single_node()
        if node is not None:
            if _expanded_size(node, {}) > MAX_VALUES:
                raise yaml.YAMLError(f"its aliases expand to more than {MAX_VALUES:,} values, the most a "
                                     "file here may hold")
        return node


def _expanded_size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """The values ``node`` stands for, each alias counted as often as it is used (memoised on the shared nodes, so
    the count costs the document's size, not the expansion's)."""
    if id(node) not in sizes:
        sizes[id(node)] = 1  # a recursive alias counts once
        children = [] if isinstance(node, yaml.ScalarNode) else node.value
        pairs = (part for child in children for part in (child if isinstance(child, tuple) else (child,)))
        sizes[id(node)] = 1 + sum(min(_expanded_size(part, sizes), MAX_VALUES + 1) for part in pairs)
    return sizes[id(node)]


def load_yaml(text: str):
    """``yaml.safe_load`` with the expansion bound; a bomb is a ``yaml.YAMLError``, as any other bad YAML."""
    return yaml.load(text, Loader=BoundedLoader)
