"""The menus every engine's `prepare` compiles (tier a: tables, no model)."""

from __future__ import annotations

import doctest
from typing import Any

import pytest
from stackroute.runtime.catalog import build_tree
from stackroute.server.engines import menu_variants as module
from stackroute.server.engines.menu_variants import menu_variants


def leaf(name: str) -> dict[str, Any]:
    return {"name": name, "description": f"the {name} tool"}


@pytest.mark.parametrize(("catalog", "expected"), [
    ({"name": "root", "children": [leaf("a")]}, [("a", "DONE")]),
    ({"name": "root", "children": [leaf("a"), leaf("b")]}, [("a", "b", "DONE")]),
    ({"name": "root", "children": [
        {"name": "mail", "description": "email", "children": [leaf("send"), leaf("read")]},
        {"name": "files", "description": "files", "children": [
            {"name": "cloud", "description": "cloud", "children": [leaf("upload")]}]}]},
     [("mail", "files", "DONE"),
      ("send", "read", "BACK"), ("send", "read", "DONE"),
      ("cloud", "BACK"), ("cloud", "DONE"),
      ("upload", "BACK"), ("upload", "DONE")]),
])
def test_root_offers_done_and_every_other_router_back_then_done(
        catalog: dict[str, Any], expected: list[tuple[str, ...]]) -> None:
    assert sorted(menu_variants(build_tree(catalog))) == sorted(expected)


def test_doctests() -> None:
    assert doctest.testmod(module).failed == 0
