"""Menus fit the model's context: a catalog whose deepest menus overflow at the default
description length is routed with clipped descriptions, not refused on every request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from stackroute.runtime.catalog import build_tree, load_catalog
from stackroute.runtime.machine import StackMachine
from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt, PromptStyle
from stackroute.runtime.tree import CapabilityTree, Node
from stackroute.server.routing.menu_fit import DESCRIPTION_LADDER, fitted_style
from stackroute.server.routing.router import build_machine

WORDS = ["ledger", "invoice", "payment", "refund", "account", "holder", "balance",
         "statement", "transfer", "audit", "archive", "export", "schedule"]


def wide_catalog(num_fields: int, num_leaves: int) -> dict[str, Any]:
    """Like Seal-Tools: many fields at the root, each with long-described leaves."""
    def text(seed: int) -> str:
        return " ".join(WORDS[(seed * 7 + k) % len(WORDS)] for k in range(60))

    return {"name": "wide", "description": "wide catalog", "children": [
        {"name": f"field_{i}", "description": text(i), "children": [
            {"name": f"tool_{i}_{j}", "description": text(i + j),
             "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}
            for j in range(num_leaves)]}
        for i in range(num_fields)]}


def chars_per_token(turn: Message) -> int:
    return len(turn.content) // 4


def test_a_catalog_that_fits_keeps_the_default_descriptions() -> None:
    tree = build_tree(wide_catalog(4, 3))
    style = fitted_style(tree, chars_per_token, max_context_tokens=8192,
                         max_argument_tokens=384)
    assert style == PromptStyle()


def test_descriptions_are_clipped_until_the_deepest_chain_fits() -> None:
    tree = build_tree(wide_catalog(60, 40))
    style = fitted_style(tree, chars_per_token, max_context_tokens=8192,
                         max_argument_tokens=384)
    assert style.max_description_chars in DESCRIPTION_LADDER[1:]
    longer = [n for n in DESCRIPTION_LADDER if n > style.max_description_chars]
    assert fitted_style(tree, chars_per_token, max_context_tokens=8192,
                        max_argument_tokens=384,
                        base=PromptStyle(max_description_chars=longer[-1])) == style


def chain_prompts(machine: StackMachine, tree: CapabilityTree, count: int = 64,
                  ) -> list[Prompt]:
    """The routing prompts of the `count` routers whose chains of menus from the root are the
    longest in characters: the root's prompt, then each router's answer and menu turn."""
    layout = machine.layout
    state = machine.start("Show the health workforce statistics for Kenya")
    def chain_chars(node: Node) -> int:
        return sum(len(layout.menu_turn(tree.node(node.path[:k])).content)
                   for k in range(1, len(node.path) + 1))

    prompts = []
    for deep in sorted(tree.routers(), key=chain_chars, reverse=True)[:count]:
        prompt = layout.routing_prompt(state)
        for k in range(1, len(deep.path) + 1):
            router = tree.node(deep.path[:k])
            prompt = prompt.extend(Message("assistant", router.name), layout.menu_turn(router))
        prompts.append(prompt)
    return prompts


@pytest.mark.model
def test_the_seal_tools_catalog_is_routed_within_the_real_model_context(
        engine: Any, shared_data: Path) -> None:
    """Its deepest chains of menus (146 fields at the root, then a field's and a subfield's
    menus) outgrew SmolLM2's 8,192 tokens ("prompt needs 8475 tokens": every request the
    README's own `eval` line ran failed); now they fit with room for the arguments."""
    tree = load_catalog(shared_data / "seal-tools" / "seal-tools.catalog.json")
    machine = build_machine(tree, engine)
    unclipped = build_machine(tree, engine, style=PromptStyle())
    assert max(engine.count_tokens(p) for p in chain_prompts(unclipped, tree)) > \
        engine.info.max_context_tokens  # the old failure
    assert machine.layout.style.max_description_chars < PromptStyle().max_description_chars
    assert max(engine.count_tokens(p) for p in chain_prompts(machine, tree)) \
        <= engine.info.max_context_tokens - 384
