"""The flat baseline: the same leaves in one menu, so benchmarks compare like with like."""

from __future__ import annotations

from typing import Any

from stackroute.runtime.tree import CapabilityTree, Node


def flatten(tree: CapabilityTree) -> CapabilityTree:
    """Every leaf as a direct child of the root, `tree_path` kept in its metadata.

    Leaf names that collide across branches get their path joined with `__` so that sibling
    names stay unique.
    """
    leaves = list(tree.leaves())
    counts: dict[str, int] = {}
    for leaf in leaves:
        counts[leaf.name] = counts.get(leaf.name, 0) + 1
    children = []
    for leaf in leaves:
        name = leaf.name if counts[leaf.name] == 1 else "__".join(leaf.path)
        meta: dict[str, Any] = {**leaf.metadata, "tree_path": leaf.path_str}
        children.append(Node(name=name, path=(name,), description=leaf.description,
                             parameters=leaf.parameters, sensitive=leaf.sensitive,
                             handler=leaf.handler, metadata=meta))
    return CapabilityTree(Node(name=tree.root.name, path=(), description=tree.root.description,
                               children=tuple(children), metadata=tree.root.metadata))
