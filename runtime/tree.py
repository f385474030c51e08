"""The capability tree: immutable router and leaf nodes with fast lookups by path."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from statistics import median
from typing import Any

PATH_SEP = "/"


@dataclass(frozen=True)
class Node:
    """A router (has children) or a leaf (has parameters and maybe a handler).

    `path` is the tuple of names from the root's child down; the root's path is `()`.
    """

    name: str
    path: tuple[str, ...]
    description: str
    children: tuple[Node, ...] = ()
    parameters: Mapping[str, Any] | None = None
    sensitive: bool = False
    handler: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_leaf(self) -> bool:
        return not self.children

    @property
    def path_str(self) -> str:
        return PATH_SEP.join(self.path)

    @property
    def depth(self) -> int:
        return len(self.path)

    def child(self, name: str) -> Node | None:
        for c in self.children:
            if c.name == name:
                return c
        return None

    @property
    def child_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.children)


@dataclass(frozen=True)
class TreeStats:
    num_leaves: int
    num_routers: int
    depth: int
    max_menu: int
    largest_menu_path: str
    branching_by_level: tuple[Mapping[str, float], ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "num_leaves": self.num_leaves,
            "num_routers": self.num_routers,
            "depth": self.depth,
            "max_menu": self.max_menu,
            "largest_menu_path": self.largest_menu_path,
            "branching_by_level": [dict(b) for b in self.branching_by_level],
        }


class CapabilityTree:
    """An immutable tree of nodes with O(1) lookup by path string."""

    def __init__(self, root: Node) -> None:
        self.root = root
        self._by_path: dict[str, Node] = {n.path_str: n for n in _walk(root)}

    @property
    def name(self) -> str:
        return self.root.name

    def node(self, path: str | tuple[str, ...]) -> Node:
        key = path if isinstance(path, str) else PATH_SEP.join(path)
        node = self._by_path.get(key.strip(PATH_SEP))
        if node is None:
            raise KeyError(f"no node at path {key!r} in catalog {self.name!r}")
        return node

    def get(self, path: str) -> Node | None:
        return self._by_path.get(path.strip(PATH_SEP))

    def __contains__(self, path: str) -> bool:
        return path.strip(PATH_SEP) in self._by_path

    def nodes(self) -> Iterator[Node]:
        return iter(self._by_path.values())

    def leaves(self) -> Iterator[Node]:
        return (n for n in self._by_path.values() if n.is_leaf and n.depth > 0)

    def routers(self) -> Iterator[Node]:
        return (n for n in self._by_path.values() if not n.is_leaf)

    def stats(self) -> TreeStats:
        routers = list(self.routers())
        leaves = list(self.leaves())
        by_level: dict[int, list[int]] = {}
        for r in routers:
            by_level.setdefault(r.depth, []).append(len(r.children))
        levels = tuple(
            {
                "level": float(lvl),
                "routers": float(len(sizes)),
                "min": float(min(sizes)),
                "median": float(median(sizes)),
                "mean": round(sum(sizes) / len(sizes), 2),
                "max": float(max(sizes)),
            }
            for lvl, sizes in sorted(by_level.items())
        )
        widest = max(routers, key=lambda r: len(r.children), default=self.root)
        return TreeStats(
            num_leaves=len(leaves),
            num_routers=len(routers),
            depth=max((leaf.depth for leaf in leaves), default=0),
            max_menu=len(widest.children),
            largest_menu_path=widest.path_str,
            branching_by_level=levels,
        )


def _walk(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))
