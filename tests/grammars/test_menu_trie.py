"""Token tries over raw token sequences: layout, ancestors, branch points, errors."""

from __future__ import annotations

import numpy as np
import pytest
from stackroute.grammars.trie import ROOT, TokenTrie, TrieEdge

END = 99
# s0 = "pay", s1 = "pay" + one more token (s0 is a token prefix of s1), s2 shares only the
# first token, s3 shares nothing.
SEQUENCES = [(10, 11, END), (10, 11, 12, END), (10, 13, END), (20, END)]


def test_flat_layout_is_preorder_by_token_id() -> None:
    trie = TokenTrie.from_sequences(SEQUENCES)
    assert trie.token_ids == (10, 11, 12, 13, 20)
    assert trie.parent == (ROOT, 0, 1, 0, ROOT)
    assert trie.depth == (1, 2, 3, 2, 1)
    assert trie.num_nodes == 5
    assert trie.num_sequences == 4


def test_edges_put_end_token_and_continuation_side_by_side() -> None:
    trie = TokenTrie.from_sequences(SEQUENCES)
    assert trie.edges(ROOT) == (TrieEdge(10, 0, None), TrieEdge(20, 4, None))
    assert trie.edges(0) == (TrieEdge(11, 1, None), TrieEdge(13, 3, None))
    assert trie.edges(1) == (TrieEdge(12, 2, None), TrieEdge(END, None, 0))
    assert trie.edges(2) == (TrieEdge(END, None, 1),)
    assert trie.edges(4) == (TrieEdge(END, None, 3),)


def test_branch_points_are_nodes_with_two_or_more_children() -> None:
    assert TokenTrie.from_sequences(SEQUENCES).branch_points == (ROOT, 0, 1)


def test_paths_name_the_node_each_token_is_chosen_at() -> None:
    trie = TokenTrie.from_sequences(SEQUENCES)
    assert [trie.path(s) for s in range(4)] == [
        (ROOT, 0, 1),
        (ROOT, 0, 1, 2),
        (ROOT, 0, 3),
        (ROOT, 4),
    ]
    assert all(len(trie.path(s)) == len(SEQUENCES[s]) for s in range(4))


def test_ancestor_matrix_is_exact() -> None:
    matrix = TokenTrie.from_sequences(SEQUENCES).ancestor_matrix()
    expected = np.array(
        [
            [1, 0, 0, 0, 0],
            [1, 1, 0, 0, 0],
            [1, 1, 1, 0, 0],
            [1, 0, 0, 1, 0],
            [0, 0, 0, 0, 1],
        ],
        dtype=bool,
    )
    assert matrix.dtype == np.bool_
    np.testing.assert_array_equal(matrix, expected)
    assert not matrix.flags.writeable


def test_single_sequence_has_no_branch_point() -> None:
    trie = TokenTrie.from_sequences([(7, 8, END)])
    assert trie.token_ids == (7, 8)
    assert trie.parent == (ROOT, 0)
    assert trie.branch_points == ()


def test_input_order_does_not_change_the_layout() -> None:
    forward = TokenTrie.from_sequences(SEQUENCES)
    backward = TokenTrie.from_sequences(SEQUENCES[::-1])
    assert forward.token_ids == backward.token_ids
    assert forward.parent == backward.parent
    assert forward.branch_points == backward.branch_points


@pytest.mark.parametrize(
    ("sequences", "message"),
    [
        ([(1, END), ()], "sequence 1 is empty"),
        ([(1, END), (1, END)], "sequences 0 and 1 are not prefix-free"),
        ([(1, 2), (1, 2, 3)], "sequences 0 and 1 are not prefix-free"),
        ([(1, 2, 3), (1, 2)], "sequences 1 and 0 are not prefix-free"),
    ],
)
def test_rejects_empty_and_non_prefix_free_sequences(
    sequences: list[tuple[int, ...]], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        TokenTrie.from_sequences(sequences)
