"""Path verification: the optional engine capability speculative routing needs.

An engine that can verify a drafted path takes the routing calls a path root → … → leaf
would make (each level's prompt extends the previous one by the drafted answer and the next
menu turn) and returns, for every level, the constrained choice the model makes given that
level's prompt — all from one forward pass where the engine can. Whether a level's result is
the step-by-step decision is the caller's call (it is when every earlier level's choice
equals its drafted name); the engine only computes.

The transformers engine implements it natively (tree attention over every level's menu
trie). vLLM and the remote engine do not: vLLM scores prompt positions only through prompt
logprobs, which bypass its prefix cache and cannot apply a menu constraint per level, so
those engines route step by step (`docs/architecture.md`, speculative routing).

Level verification (`LevelVerifier`) is the same for prompts that are *not* nested: the
requests that unwind the stack after a leaf call (each DONE drops the child's turns and
appends its summary to the parent), which share only the header and the ancestors' turns.
The transformers engine runs them as a prompt tree in one pass (`tree_attention.levels_batch`);
vLLM and the remote engine do not implement it, for the reason above, and unwind step by step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from stackroute.server.engines.base import EngineError, MenuResult, PromptInput


@dataclass(frozen=True)
class PathLevel:
    """One level of a drafted path: the prompt and menu step-by-step routing would see there,
    the name the draft answers, and the additive log-space bias step-by-step routing would
    put on the options there (the guided policy's evidence prior and contrast; none: plain)."""

    prompt: PromptInput
    options: tuple[str, ...]
    draft: str
    option_bias: Mapping[str, float] | None = None


class PathLayoutError(EngineError, ValueError):
    """A drafted path whose prompts are not append-only (level k + 1's tokens do not start
    with level k's prompt and drafted answer), so one pass cannot stand for the levels. (A
    ValueError too: the speculator falls back to step-by-step routing on either.)"""

    code = "path_layout"


@runtime_checkable
class PathVerifier(Protocol):
    def verify_path(self, levels: Sequence[PathLevel]) -> list[MenuResult]:
        """Every level's constrained choice under its drafted context, in order. The first
        result carries the pass's cost; later ones only their own prompt and answer tokens."""
        ...


@dataclass(frozen=True)
class MenuLevel:
    """One routing call of several computed together: its prompt, its menu, and the additive
    log-space bias step-by-step routing would put on its options (none: plain)."""

    prompt: PromptInput
    options: tuple[str, ...]
    option_bias: Mapping[str, float] | None = None


@runtime_checkable
class LevelVerifier(Protocol):
    def verify_levels(self, levels: Sequence[MenuLevel]) -> list[MenuResult]:
        """Each level's constrained choice under its own prompt, all from one pass where the
        engine can; the prompts need only share a prefix. The first result carries the
        pass's cost; later ones only their own prompt and answer tokens."""
        ...
