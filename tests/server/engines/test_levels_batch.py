"""Tier (a): the prompt-tree inputs of one unwinding pass (`levels_batch`), as exact tables."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from stackroute.server.engines.tree_attention import levels_batch


def leaf(token: int) -> Any:
    return SimpleNamespace(num_nodes=1, flat_token_ids=(token,), flat_depth=(1,),
                           ancestor_matrix=lambda: [[True]])


def test_levels_with_nothing_cached_share_their_common_tokens_once() -> None:
    # level 0: 1 2 3, level 1: 1 2 4 5 (a parent's prompt: same header, another tail)
    batch = levels_batch([[1, 2, 3], [1, 2, 4, 5]], [], [leaf(90), leaf(91)])
    assert batch.token_ids == [1, 2, 3, 4, 5, 90, 91]
    assert batch.position_ids.tolist() == [[0, 1, 2, 2, 3, 3, 4]]
    assert batch.keep_rows == [2, 5, 4, 6]
    assert batch.num_tree_tokens == 4  # all but level 0's three tokens
    assert batch.mask.int()[0, 0].tolist() == [
        [1, 0, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 0, 0],
        [1, 1, 0, 1, 0, 0, 0],  # 4 follows 1 2, not 3
        [1, 1, 0, 1, 1, 0, 0],
        [1, 1, 1, 0, 0, 1, 0],  # level 0's menu: its prompt and itself
        [1, 1, 0, 1, 1, 0, 1],  # level 1's menu
    ]


def test_a_level_that_leaves_the_cached_prefix_early_sees_only_its_part() -> None:
    # cached: 1 2 3 4 (level 0's head); level 1 leaves it after 1 2; level 2 after 1.
    batch = levels_batch([[1, 2, 3, 4, 5], [1, 2, 6], [1, 7]], [1, 2, 3, 4],
                         [leaf(90), leaf(91), leaf(92)])
    assert batch.token_ids == [5, 6, 7, 90, 91, 92]
    assert batch.position_ids.tolist() == [[4, 2, 1, 5, 3, 2]]
    assert batch.mask.int()[0, 0, :, :4].tolist() == [  # the cached columns
        [1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]]


def test_a_level_whose_whole_prompt_is_cached_still_runs_its_last_token() -> None:
    batch = levels_batch([[1, 2, 3, 4], [1, 2]], [1, 2, 3], [leaf(90), leaf(91)])
    assert batch.token_ids == [4, 2, 90, 91]
    assert batch.position_ids.tolist() == [[3, 1, 4, 2]]
    assert batch.mask.int()[0, 0, 1, :3].tolist() == [1, 0, 0]


def test_the_cached_tokens_must_be_a_proper_prefix_of_level_0() -> None:
    with pytest.raises(ValueError, match="proper prefix"):
        levels_batch([[1, 2]], [1, 2], [leaf(90)])
    with pytest.raises(ValueError, match="proper prefix"):
        levels_batch([[1, 2, 3]], [9], [leaf(90)])
