"""Menus that fit the model's context: clip option descriptions until the deepest chain of
menus a run can stack fits, with room left for the request, the turns and the arguments.

A routing prompt holds the menu turn of every frame on the stack, so a catalog with a wide
root and a wide second level can outgrow a small model's context at depth two even when each
menu alone fits. The real Seal-Tools catalog (146 fields at the root) does: at the default
300 characters per description its root prompt is about 8,500 tokens, over SmolLM2's 8,192,
so every request failed before its first decision. Descriptions are clipped (never names,
never options dropped) to the longest of `DESCRIPTION_LADDER` that fits; a catalog that fits
at the default keeps it. Counting tokens is one tokenisation per menu turn on the longest
chains by characters, per step of the ladder, memoised per (tree, model).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable

from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import PromptLayout, PromptStyle
from stackroute.runtime.tree import CapabilityTree

log = logging.getLogger(__name__)

DESCRIPTION_LADDER = (300, 240, 200, 160, 120, 100, 80, 60, 40, 20)
RESERVED_TOKENS = 512  # the system text, the request, result and answer turns
_MAX_TREES = 64
_CHAINS_COUNTED = 64  # the longest chains by characters, counted in tokens
_TEMPLATE_TOKENS = 8  # a message's chat-template tokens (role markers, newlines)

CountTokens = Callable[[Message], int]


def fitted_style(tree: CapabilityTree, count_tokens: CountTokens, *, max_context_tokens: int,
                 max_argument_tokens: int, base: PromptStyle | None = None) -> PromptStyle:
    """`base` (default: `PromptStyle()`) with the longest description limit from
    `DESCRIPTION_LADDER` (none longer than the base's) under which the deepest chain of menu
    turns fits `max_context_tokens - max_argument_tokens - RESERVED_TOKENS`; the shortest
    rung when none fits (the engine then refuses the prompts that overflow)."""
    base = base or PromptStyle()
    budget = max_context_tokens - max_argument_tokens - RESERVED_TOKENS
    rungs = [base.max_description_chars,
             *(n for n in DESCRIPTION_LADDER if n < base.max_description_chars)]
    style = base
    for limit in rungs:
        style = PromptStyle(show_schemas=base.show_schemas, max_description_chars=limit)
        tokens = _deepest_chain_tokens(tree, PromptLayout(tree, style), count_tokens,
                                       budget)
        if tokens <= budget:
            break
    if style.max_description_chars != base.max_description_chars:
        log.info("menu descriptions clipped to %d characters so the deepest menus fit the "
                 "model's context of %d tokens", style.max_description_chars,
                 max_context_tokens)
    return style


def _deepest_chain_tokens(tree: CapabilityTree, layout: PromptLayout,
                          count_tokens: CountTokens, budget: int) -> int:
    """Tokens of the largest sum of menu turns on one root-to-router chain (or an upper
    bound, when that is within `budget`). Every chain's length in characters is cheap and
    bounds its tokens; tokens per character vary by menu (underscored tool names tokenise
    worse than prose), so past the budget the `_CHAINS_COUNTED` longest chains by
    characters are counted exactly, one tokenisation per menu turn on them."""
    turns = {n.path: layout.menu_turn(n) for n in tree.routers()}
    chars = {path: len(turn.content) for path, turn in turns.items()}
    chains: dict[tuple[str, ...], int] = {}
    for path in sorted(turns, key=len):
        chains[path] = chars[path] + (chains[path[:-1]] if path else 0)
    bound = max(chains[p] + _TEMPLATE_TOKENS * (len(p) + 1) for p in chains)
    if bound <= budget:  # a token spans at least one character: fits, nothing to count
        return bound
    longest = sorted(chains, key=lambda p: chains[p], reverse=True)[:_CHAINS_COUNTED]
    tokens: dict[tuple[str, ...], int] = {}
    for path in longest:
        for k in range(len(path) + 1):
            if path[:k] not in tokens:
                tokens[path[:k]] = count_tokens(turns[path[:k]])
    return max(sum(tokens[path[:k]] for k in range(len(path) + 1)) for path in longest)


class StyleCache:
    """`fitted_style` memoised per tree object and engine model (a service builds a machine
    per request; a catalog's fit is computed once). Holds its trees: bounded."""

    def __init__(self, max_entries: int = _MAX_TREES) -> None:
        self.max_entries = max_entries
        self._styles: OrderedDict[tuple[int, str], tuple[CapabilityTree, PromptStyle]] = \
            OrderedDict()
        self._lock = threading.Lock()

    def get(self, tree: CapabilityTree, model: str,
            compute: Callable[[], PromptStyle]) -> PromptStyle:
        key = (id(tree), model)
        with self._lock:
            found = self._styles.get(key)
            if found is not None and found[0] is tree:
                self._styles.move_to_end(key)
                return found[1]
        style = compute()
        with self._lock:
            self._styles[key] = (tree, style)
            while len(self._styles) > self.max_entries:
                self._styles.popitem(last=False)
        return style

