"""A token trie over a prefix-free set of token sequences, laid out flat for one forward pass.

Every sequence ends at a leaf edge. Internal nodes (tokens that some sequence continues after)
are numbered in depth-first preorder, children in ascending token id, so a node's parent always
has a smaller index and every subtree is one contiguous run of indices. That flat list is what
an engine feeds to the model with tree attention; the token of a leaf edge (a menu's end token)
is never fed, because nothing is generated after it.

>>> trie = TokenTrie.from_sequences([(5, 9), (5, 7, 9), (6, 9)])
>>> trie.token_ids, trie.parent, trie.depth
((5, 7, 6), (-1, 0, -1), (1, 2, 1))
>>> trie.branch_points
(-1, 0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

ROOT = -1
"""The node index of the trie's root: its distribution comes from the last prompt position."""


@dataclass(frozen=True, slots=True)
class TrieEdge:
    """One child of a node: the token taken, and where it leads.

    Exactly one of `node` (the flat index of an internal child) and `sequence` (the index of
    the sequence this token completes) is set.
    """

    token_id: int
    node: int | None
    sequence: int | None


@dataclass(frozen=True)
class TokenTrie:
    """Immutable trie over token sequences; build it with `from_sequences`."""

    token_ids: tuple[int, ...]
    """Token of each internal node, `[num_nodes]`, in preorder."""
    parent: tuple[int, ...]
    """Parent of each internal node (`ROOT` = -1 for children of the root)."""
    depth: tuple[int, ...]
    """1-based depth of each internal node: its offset after the prompt."""
    edges_by_node: tuple[tuple[TrieEdge, ...], ...]
    """Children of the root (index 0) and of each internal node `i` (index `i + 1`)."""
    leaf_parent: tuple[int, ...]
    """The node each sequence's last token is chosen at, by sequence index."""

    @classmethod
    def from_sequences(cls, sequences: Sequence[Sequence[int]]) -> TokenTrie:
        """Build the trie. Sequences must be non-empty and prefix-free (none a prefix of
        another, so none equal); violations raise ValueError naming the sequence indices."""
        return _build(sequences)

    @property
    def num_nodes(self) -> int:
        return len(self.token_ids)

    @property
    def num_sequences(self) -> int:
        return len(self.leaf_parent)

    def edges(self, node: int) -> tuple[TrieEdge, ...]:
        """Children of `node` (`ROOT` or a flat index), in ascending token id."""
        return self.edges_by_node[node + 1]

    @cached_property
    def branch_points(self) -> tuple[int, ...]:
        """Nodes with two or more children, `ROOT` first, then in preorder. Only here does
        the model's distribution matter; a single-child node's token is forced."""
        return tuple(
            node for node in range(ROOT, self.num_nodes) if len(self.edges(node)) >= 2
        )

    def path(self, sequence: int) -> tuple[int, ...]:
        """The nodes at which each token of `sequence` is chosen, root first."""
        nodes = [self.leaf_parent[sequence]]
        while nodes[-1] != ROOT:
            nodes.append(self.parent[nodes[-1]])
        nodes.reverse()
        return tuple(nodes)

    def ancestor_matrix(self) -> NDArray[np.bool_]:
        """`[num_nodes, num_nodes]` bool, `m[i, j]` = node j is node i or an ancestor of it.

        Row i is what the trie token at flat position i may attend to (besides the prompt).
        The array is computed once, shared and read-only; copy it to modify.
        """
        return self._ancestor_matrix

    @cached_property
    def _ancestor_matrix(self) -> NDArray[np.bool_]:
        n = self.num_nodes
        matrix = np.zeros((n, n), dtype=np.bool_)
        for node, parent in enumerate(self.parent):
            # Preorder: the parent's row is complete before its children's are built.
            if parent != ROOT:
                matrix[node] = matrix[parent]
            matrix[node, node] = True
        matrix.flags.writeable = False
        return matrix


@dataclass
class _Draft:
    """A mutable node while building: token -> child draft or completed sequence index."""

    children: dict[int, _Draft | int] = field(default_factory=dict)


def _insert(root: _Draft, index: int, sequence: Sequence[int]) -> None:
    if not sequence:
        raise ValueError(f"sequence {index} is empty")
    node = root
    for position, token in enumerate(sequence):
        is_last = position == len(sequence) - 1
        child = node.children.get(token)
        if isinstance(child, int):
            raise ValueError(
                f"sequences {child} and {index} are not prefix-free: "
                f"sequence {child} ends where sequence {index} continues"
            )
        if child is None:
            if is_last:
                node.children[token] = index
                return
            child = _Draft()
            node.children[token] = child
        elif is_last:
            other = _first_sequence(child)
            raise ValueError(
                f"sequences {index} and {other} are not prefix-free: "
                f"sequence {index} ends where sequence {other} continues"
            )
        node = child


def _first_sequence(draft: _Draft) -> int:
    for child in draft.children.values():
        return child if isinstance(child, int) else _first_sequence(child)
    raise ValueError("empty trie node")  # our bug: drafts always end in sequences


def _build(sequences: Sequence[Sequence[int]]) -> TokenTrie:
    root = _Draft()
    for index, sequence in enumerate(sequences):
        _insert(root, index, sequence)

    token_ids: list[int] = []
    parent: list[int] = []
    depth: list[int] = []
    edges_by_node: list[tuple[TrieEdge, ...]] = []
    leaf_parent = [ROOT] * len(sequences)

    def visit(draft: _Draft, node: int, node_depth: int) -> None:
        # Recursion depth is the longest sequence (a name's token count): tens, not thousands.
        slot = node + 1
        edges_by_node.append(())
        edges: list[TrieEdge] = []
        for token in sorted(draft.children):
            child = draft.children[token]
            if isinstance(child, int):
                leaf_parent[child] = node
                edges.append(TrieEdge(token_id=token, node=None, sequence=child))
            else:
                child_node = len(token_ids)
                token_ids.append(token)
                parent.append(node)
                depth.append(node_depth + 1)
                edges.append(TrieEdge(token_id=token, node=child_node, sequence=None))
                visit(child, child_node, node_depth + 1)
        edges_by_node[slot] = tuple(edges)

    visit(root, ROOT, 0)
    return TokenTrie(
        token_ids=tuple(token_ids),
        parent=tuple(parent),
        depth=tuple(depth),
        edges_by_node=tuple(edges_by_node),
        leaf_parent=tuple(leaf_parent),
    )
