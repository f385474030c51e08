"""The vLLM engine's menu scoring (`MenuMode.SCORE`): log-probabilities of every branch point's
children in a menu's canonical token trie, from unconstrained `max_tokens=1` requests whose
`logprob_token_ids` are those children. The root goes first, alone, so its prompt is in vLLM's
prefix cache before the deeper branch points (the prompt plus a few trie tokens) are scored
together: one request for options with distinct first tokens, two when they share prefixes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from stackroute.grammars.menu import CompiledMenu
from stackroute.grammars.trie import ROOT
from stackroute.runtime.usage import Usage

MAX_LOGPROB_TOKEN_IDS = 128  # vLLM's cap per request; wider branch points are split

Submit = Callable[[Sequence[tuple[list[int], Any]]], list[Any]]
"""Runs `(prompt ids, SamplingParams)` requests together; their `RequestOutput`s in order."""


def score_params(token_ids: list[int]) -> Any:
    """One unconstrained step that reports the log-probabilities of `token_ids`."""
    from vllm import SamplingParams

    return SamplingParams(max_tokens=1, temperature=0.0, logprob_token_ids=token_ids,
                          detokenize=False)


def score_branch_points(ids: list[int], menu: CompiledMenu, submit: Submit,
                        ) -> tuple[dict[int, np.ndarray[Any, Any]], Usage]:
    """Log-probabilities of each branch point's children, as sparse rows (-inf elsewhere)
    for `CompiledMenu.decide`, and what scoring them cost."""
    trie = menu.trie
    points = list(menu.branch_points)
    width = 1 + max(e.token_id for n in points for e in trie.edges(n))
    rows = {n: np.full(width, -np.inf) for n in points}
    usage = Usage()
    for phase in ([ROOT], [n for n in points if n != ROOT]):
        requests, owners = [], []
        for node in phase:
            children = [e.token_id for e in trie.edges(node)]
            for at in range(0, len(children), MAX_LOGPROB_TOKEN_IDS):
                chunk = children[at:at + MAX_LOGPROB_TOKEN_IDS]
                requests.append((ids + trie_path(trie, node), score_params(chunk)))
                owners.append((node, chunk))
        if not requests:
            continue
        outs = submit(requests)
        for (node, chunk), (prompt_ids, _), out in zip(owners, requests, outs, strict=True):
            scored = out.outputs[0].logprobs[0]
            rows[node][chunk] = [scored[t].logprob for t in chunk]
            cached = int(out.num_cached_tokens or 0)
            usage += Usage(prefill_tokens=len(prompt_ids) - cached,
                           cached_tokens=cached if node == ROOT else 0)
        usage += Usage(forward_passes=1)
    return rows, usage


def trie_path(trie: Any, node: int) -> list[int]:
    """The trie tokens from the root down to `node` (its own token last)."""
    tokens: list[int] = []
    while node != ROOT:
        tokens.append(trie.token_ids[node])
        node = trie.parent[node]
    return tokens[::-1]
