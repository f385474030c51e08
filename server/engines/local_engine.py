"""What the two engines that run the model in this process (transformers on CPU, vLLM on GPU)
do the same way: they render prompts to token ids themselves (`ChatRenderer`), compile menus
into token tries once per tokenizer, count tokens without a model call, check a prompt against
the context window before it runs, and answer a choice constraint by scoring the menu.

The remote engine renders nothing (the upstream does), so it does not share this base.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from stackroute.grammars.cache import ConstraintCache
from stackroute.grammars.menu import CompiledMenu, compile_menu
from stackroute.runtime.tree import CapabilityTree
from stackroute.server.engines.base import (
    Constraint,
    DeltaSink,
    EngineInfo,
    Generation,
    MenuResult,
    PromptInput,
    SamplingOptions,
)
from stackroute.server.engines.common import (
    check_context,
    generation_from_choice,
    single_option_result,
)
from stackroute.server.engines.menu_variants import menu_variants
from stackroute.server.engines.option_scoring import check_menu
from stackroute.server.engines.rendering import ChatRenderer
from stackroute.server.engines.streaming import TextAssembler


class LocalEngine(ABC):
    """An engine whose model runs here. A subclass sets these attributes in its `__init__`
    and implements `_score_menu` (the decision once a menu has two or more options) and
    `generate_stream`."""

    tokenizer: Any
    renderer: ChatRenderer
    fingerprint: str  # the tokenizer's (grammars/cache.py): compiled menus are keyed by it
    menus: ConstraintCache[CompiledMenu]
    info: EngineInfo

    @abstractmethod
    def _score_menu(self, prompt: PromptInput, menu: CompiledMenu, ids: list[int], *,
                    option_bias: Mapping[str, float] | None, started: float) -> MenuResult:
        """The decision on a menu of two or more options whose prompt `ids` fit the context
        (`started`: `time.perf_counter()` when `choose` began, for the usage's latency)."""

    @abstractmethod
    def generate_stream(self, prompt: PromptInput, *, on_delta: DeltaSink | None,
                        constraint: Constraint | None = None,
                        sampling: SamplingOptions | None = None) -> Generation: ...

    def compiled_menu(self, options: Sequence[str]) -> CompiledMenu:
        menu = check_menu(options)
        return self.menus.get_or_compile(("menu", menu), self.fingerprint, lambda: compile_menu(
            menu, self.tokenizer, end_token_id=self.renderer.end_of_turn_id))

    def _compile_menus(self, tree: CapabilityTree) -> list[tuple[str, ...]]:
        """Compile every router's menus (`menu_variants`) into token tries; those menus."""
        menus = menu_variants(tree)
        for menu in menus:
            self.compiled_menu(menu)
        return menus

    def choose(self, prompt: PromptInput, options: Sequence[str], *,
               option_bias: Mapping[str, float] | None = None) -> MenuResult:
        started = time.perf_counter()
        menu, ids = self._menu_prompt(prompt, options)
        if not menu.branch_points:  # one option: nothing to decide, no model call
            return single_option_result(menu.options[0])
        return self._score_menu(prompt, menu, ids, option_bias=option_bias, started=started)

    def count_tokens(self, prompt: PromptInput) -> int:
        return len(self.renderer.prompt_ids(prompt))

    def generate(self, prompt: PromptInput, *, constraint: Constraint | None = None,
                 sampling: SamplingOptions | None = None) -> Generation:
        return self.generate_stream(prompt, on_delta=None, constraint=constraint,
                                    sampling=sampling)

    def _menu_prompt(self, prompt: PromptInput,
                     options: Sequence[str]) -> tuple[CompiledMenu, list[int]]:
        """The menu's token trie and the prompt's ids, checked to fit the context with the
        menu's longest answer after them."""
        menu = self.compiled_menu(options)
        ids = self.renderer.prompt_ids(prompt)
        check_context(len(ids) + max(len(s) for s in menu.sequences),
                      self.info.max_context_tokens)
        return menu, ids

    def _generation_prompt(self, prompt: PromptInput) -> list[int]:
        """The prompt's ids, checked to leave room for at least one generated token."""
        ids = self.renderer.prompt_ids(prompt)
        check_context(len(ids) + 1, self.info.max_context_tokens)
        return ids

    def _scored_choice(self, prompt: PromptInput, choices: Sequence[str],
                       stream: TextAssembler | None) -> Generation:
        """A choice-constrained generation answered by `choose` (one scored pass), its text
        sent whole to the stream."""
        gen = generation_from_choice(self.choose(prompt, choices))
        if stream is not None:
            stream.finish(gen.text)
        return gen
