"""One forward pass's inputs for a prompt with menu tries hung off it (tree attention).

The pass runs the prompt's uncached tail causally and, after it, the non-terminal nodes of one
or more menus' token tries. Each trie is a *branch*: it hangs off the last token of its own
prompt (a prefix of the running prompt, or all of it) and sees that prompt and its own trie
ancestors, nothing else, at the positions the tokens would have had there. So one branch at
the end of the prompt is a menu decision (`choose`); a branch per level of a drafted path is
that path's verification (`verify_path`). The logits rows that come back are, per branch,
the row of its prompt's last token (the distribution at the trie root) then one row per trie
node (the distribution of its children).

`levels_batch` generalises the causal tail to a *prompt tree*: several prompts that share
only a prefix (the requests that unwind the stack, `verify_levels`). Each level's tokens past
what it shares with the cached prefix become trie nodes (levels that continue alike share
nodes), each sees the cached prefix up to where its prompt leaves it and its own ancestors,
and each level's menu trie hangs off its last token.

>>> from types import SimpleNamespace
>>> one_node = SimpleNamespace(num_nodes=1, flat_token_ids=(42,), flat_depth=(1,),
...                            ancestor_matrix=lambda: [[True]])
>>> batch = tree_batch([7, 8], past=3, branches=[Branch(prompt_len=5, menu=one_node)])
>>> batch.token_ids, batch.position_ids.tolist(), batch.keep_rows
([7, 8, 42], [[3, 4, 5]], [1, 2])
>>> batch.mask.int()[0, 0].tolist()  # [q, past + q]: 3 cached, 2 tail (causal), 1 trie node
[[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np


class TrieLayout(Protocol):
    """What a branch needs of a compiled menu (`grammars.menu.CompiledMenu` is one)."""

    @property
    def num_nodes(self) -> int: ...

    @property
    def flat_token_ids(self) -> Sequence[int]: ...

    @property
    def flat_depth(self) -> Sequence[int]: ...

    def ancestor_matrix(self) -> Any: ...


@dataclass(frozen=True)
class Branch:
    """A menu trie hung off the last token of the first `prompt_len` prompt tokens."""

    prompt_len: int
    menu: TrieLayout


@dataclass(frozen=True)
class TreeBatch:
    token_ids: list[int]  # [q]: the prompt's uncached tail, then each branch's trie nodes
    mask: Any  # torch bool [1, 1, q, past + q]: True where a query may attend a key
    position_ids: Any  # torch long [1, q]
    keep_rows: list[int]  # rows of q whose logits come back: per branch, its root then nodes
    num_tree_tokens: int  # trie tokens at the end; their KV is cropped off after the pass


def tree_batch(tail: Sequence[int], past: int, branches: Sequence[Branch]) -> TreeBatch:
    """The pass's inputs for the prompt tokens `tail` (at positions `past`, `past + 1`, …,
    after `past` cached ones) followed by each branch's trie. Every branch's prompt must end
    inside the tail (`past < prompt_len <= past + len(tail)`)."""
    import torch

    n_tail = len(tail)
    n_tree = sum(b.menu.num_nodes for b in branches)
    q = n_tail + n_tree
    mask = torch.zeros((1, 1, q, past + q), dtype=torch.bool)
    mask[..., :past] = True
    mask[0, 0, :n_tail, past:past + n_tail] = torch.tril(
        torch.ones(n_tail, n_tail, dtype=torch.bool))
    token_ids, positions, keep = list(tail), list(range(past, past + n_tail)), []
    offset = n_tail
    for branch in branches:
        end, n = branch.prompt_len, branch.menu.num_nodes
        if not past < end <= past + n_tail:
            raise ValueError(f"a branch's prompt ends at {end}, outside the tail "
                             f"({past}, {past + n_tail}]")  # our bug
        mask[0, 0, offset:offset + n, past:end] = True  # the branch's prompt, no further
        ancestors = np.array(branch.menu.ancestor_matrix(), dtype=np.bool_)  # writable copy
        mask[0, 0, offset:offset + n, past + offset:past + offset + n] = torch.from_numpy(
            ancestors)
        token_ids.extend(branch.menu.flat_token_ids)
        positions.extend(end + d - 1 for d in branch.menu.flat_depth)
        keep.append(end - 1 - past)
        keep.extend(range(offset, offset + n))
        offset += n
    return TreeBatch(token_ids=token_ids, mask=mask, position_ids=torch.tensor([positions]),
                     keep_rows=keep, num_tree_tokens=n_tree)


def rows_by_branch(logits: np.ndarray[Any, Any], branches: Sequence[Branch],
                   ) -> list[dict[int, np.ndarray[Any, Any]]]:
    """Split the kept logits rows `[rows, vocab]` per branch, keyed by trie node (`-1`: the
    row of the branch's last prompt token, the distribution at the trie root)."""
    out: list[dict[int, np.ndarray[Any, Any]]] = []
    at = 0
    for branch in branches:
        n = branch.menu.num_nodes
        out.append({-1: logits[at]} | {i: logits[at + 1 + i] for i in range(n)})
        at += 1 + n
    return out



def levels_batch(prompts: Sequence[Sequence[int]], past_ids: Sequence[int],
                 menus: Sequence[TrieLayout]) -> TreeBatch:
    """The pass's inputs for several prompts after the cached tokens `past_ids` (a prefix of
    `prompts[0]`, shorter than it), each with its menu's trie hung off its last token.

    A level's tokens after its longest common prefix with `past_ids` (at least its last
    token, for its logits) are nodes of a token trie, attending the cached prefix up to that
    point, their trie ancestors and themselves, at the positions they have in their own
    prompt. Level 0's nodes come first, so the KV after the pass, cropped by
    `num_tree_tokens`, is exactly `prompts[0]`'s (the only one that is a real prompt prefix).

    >>> from types import SimpleNamespace
    >>> leaf = SimpleNamespace(num_nodes=1, flat_token_ids=(42,), flat_depth=(1,),
    ...                        ancestor_matrix=lambda: [[True]])
    >>> b = levels_batch([[1, 2, 3, 4], [1, 2, 5]], [1, 2, 3], [leaf, leaf])
    >>> b.token_ids, b.position_ids.tolist(), b.keep_rows, b.num_tree_tokens
    ([4, 5, 42, 42], [[3, 2, 4, 3]], [0, 2, 1, 3], 3)
    >>> b.mask.int()[0, 0].tolist()  # [q, past + q]: 3 cached, 2 prompt nodes, 2 trie nodes
    [[1, 1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 1, 0, 0], [1, 1, 1, 1, 0, 1, 0], [1, 1, 0, 0, 1, 0, 1]]
    """
    import torch

    if len(prompts) != len(menus) or not prompts:
        raise ValueError("one menu per level, at least one level")  # our bug
    past = len(past_ids)
    if not past < len(prompts[0]) or list(prompts[0][:past]) != list(past_ids):
        raise ValueError("the cached tokens must be a proper prefix of level 0's prompt")
    tokens: list[int] = []
    positions: list[int] = []
    parents: list[int] = []  # node index, or -1: attached to the cached prefix
    attach: list[int] = []  # cached tokens a node's branch sees
    children: dict[tuple[int, int, int], int] = {}  # (attach, parent, token) -> node
    ends: list[int] = []  # each level's last node
    for ids in prompts:
        at = min(_common_prefix(ids, past_ids), len(ids) - 1)
        node = -1
        for pos in range(at, len(ids)):
            key = (at, node, int(ids[pos]))
            found = children.get(key)
            if found is None:
                found = len(tokens)
                children[key] = found
                tokens.append(int(ids[pos]))
                positions.append(pos)
                parents.append(node)
                attach.append(at)
            node = found
        ends.append(node)
    n_prompt = len(tokens)
    ancestors = np.zeros((n_prompt, n_prompt), dtype=np.bool_)
    for i, parent in enumerate(parents):  # a parent always precedes its children
        if parent >= 0:
            ancestors[i] = ancestors[parent]
        ancestors[i, i] = True
    n_tree = sum(m.num_nodes for m in menus)
    q = n_prompt + n_tree
    mask = torch.zeros((1, 1, q, past + q), dtype=torch.bool)
    for i in range(n_prompt):
        mask[0, 0, i, :attach[i]] = True
    mask[0, 0, :n_prompt, past:past + n_prompt] = torch.from_numpy(ancestors)
    keep: list[int] = []
    offset = n_prompt
    for ids, menu, end in zip(prompts, menus, ends, strict=True):
        n = menu.num_nodes
        mask[0, 0, offset:offset + n, :attach[end]] = True
        mask[0, 0, offset:offset + n, past:past + n_prompt] = torch.from_numpy(
            ancestors[end])
        mask[0, 0, offset:offset + n, past + offset:past + offset + n] = torch.from_numpy(
            np.array(menu.ancestor_matrix(), dtype=np.bool_))
        tokens.extend(menu.flat_token_ids)
        positions.extend(len(ids) + d - 1 for d in menu.flat_depth)
        keep.append(end)
        keep.extend(range(offset, offset + n))
        offset += n
    kept_prompt = len(prompts[0]) - past  # level 0's nodes: 0 .. kept_prompt - 1
    return TreeBatch(token_ids=tokens, mask=mask, position_ids=torch.tensor([positions]),
                     keep_rows=keep, num_tree_tokens=q - kept_prompt)


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n
