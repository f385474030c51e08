"""Tier (a): the tree-attention inputs one forward pass gets, as exact tables (no model)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from stackroute.server.engines.tree_attention import Branch, rows_by_branch, tree_batch


def trie(token_ids: tuple[int, ...], depth: tuple[int, ...],
         ancestors: list[list[bool]]) -> Any:
    return SimpleNamespace(num_nodes=len(token_ids), flat_token_ids=token_ids,
                           flat_depth=depth, ancestor_matrix=lambda: ancestors)


# Two nodes, the second a child of the first.
CHAIN = trie((50, 51), (1, 2), [[True, False], [True, True]])
# Two siblings at depth 1.
SIBLINGS = trie((60, 61), (1, 1), [[True, False], [False, True]])


def test_one_branch_at_the_end_of_the_prompt() -> None:
    batch = tree_batch([7, 8, 9], past=2, branches=[Branch(prompt_len=5, menu=CHAIN)])
    assert batch.token_ids == [7, 8, 9, 50, 51]
    assert batch.position_ids.tolist() == [[2, 3, 4, 5, 6]]
    assert batch.keep_rows == [2, 3, 4]
    assert batch.num_tree_tokens == 2
    assert batch.mask.int()[0, 0].tolist() == [
        # cached  tail     trie
        [1, 1, 1, 0, 0, 0, 0],
        [1, 1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1, 1, 0],
        [1, 1, 1, 1, 1, 1, 1],
    ]


def test_a_branch_per_level_sees_only_its_own_prompt() -> None:
    # level 0's prompt is the first 3 tokens; level 1's all 5 (nothing cached).
    branches = [Branch(prompt_len=3, menu=SIBLINGS), Branch(prompt_len=5, menu=CHAIN)]
    batch = tree_batch([1, 2, 3, 4, 5], past=0, branches=branches)
    assert batch.token_ids == [1, 2, 3, 4, 5, 60, 61, 50, 51]
    assert batch.position_ids.tolist() == [[0, 1, 2, 3, 4, 3, 3, 5, 6]]
    assert batch.keep_rows == [2, 5, 6, 4, 7, 8]
    assert batch.mask.int()[0, 0, 5:].tolist() == [
        [1, 1, 1, 0, 0, 1, 0, 0, 0],  # level 0's siblings: its 3 prompt tokens, themselves
        [1, 1, 1, 0, 0, 0, 1, 0, 0],
        [1, 1, 1, 1, 1, 0, 0, 1, 0],  # level 1's chain: all 5 tokens and its ancestors
        [1, 1, 1, 1, 1, 0, 0, 1, 1],
    ]
    logits = np.arange(6.0).reshape(6, 1)
    rows = rows_by_branch(logits, branches)
    assert [{k: float(v[0]) for k, v in r.items()} for r in rows] == [
        {-1: 0.0, 0: 1.0, 1: 2.0}, {-1: 3.0, 0: 4.0, 1: 5.0}]


def test_a_branch_outside_the_tail_is_our_bug() -> None:
    with pytest.raises(ValueError, match="outside the tail"):
        tree_batch([7, 8], past=3, branches=[Branch(prompt_len=3, menu=CHAIN)])
