"""The one YAML loader for files users hand us (configs, rule and policy files, tokens, web
config, file_sd): PyYAML's safe loader, with aliases bounded.

An alias is shared, not copied, when PyYAML builds the document, so a "billion laughs" file of
a few hundred bytes loads quickly, and then whatever walks it (validation, a merge key ``<<``
that copies, a repr in an error message) expands it: 3.6 GB and a MemoryError after 75 s for a
rule file, a listener frozen for 40 s by a TLS field. Before anything is built, the node graph
is measured as if every alias were expanded; more than :data:`MAX_EXPANDED_NODES` nodes, or an
alias that contains itself, is a YAML error the caller already reports as "not valid YAML".
Plain files (no alias) are unaffected; anchors used a reasonable number of times still work.
"""

from __future__ import annotations

from typing import Any, Final

import yaml

MAX_EXPANDED_NODES: Final = 1_000_000  # 50,000 targets with labels are well under it


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def expanded_size(root: yaml.Node, limit: int = MAX_EXPANDED_NODES) -> int:
    """How many nodes ``root`` holds with every alias expanded; YAMLError beyond ``limit`` or
    on a recursive alias. Each distinct node is visited once (sizes are remembered)."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # on the current path: meeting one again is recursion
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in _children(node))
            if sizes[key] > limit:
                raise yaml.YAMLError(f"aliases expand to more than {limit:,} nodes: refused "
                                     "(an alias bomb?)")
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise yaml.YAMLError("an alias refers to a node that contains it: refused")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes)
    return sizes[id(root)]


class BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that measures the document before building it."""

    def construct_document(self, node: yaml.Node) -> Any:
        expanded_size(node)
        return super().construct_document(node)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` with aliases bounded; raises yaml.YAMLError like it."""
    return yaml.load(text, Loader=BoundedLoader)
