"""Tier c's rule: a test that uses the real embedded model carries `@pytest.mark.model`.

`-m "not model"` is the quick run; it must leave out every test that loads (or converts) the
real model. A fixture that does is decorated `@loads_the_real_model` (under `@pytest.fixture`);
tests/conftest.py refuses, at setup and before any fixture runs, an unmarked test whose fixtures
(as resolved for it, overrides and fixtures of fixtures included) reach one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest

F = TypeVar("F", bound=Callable[..., object])

MARKER = "real_model_fixture"


def loads_the_real_model(function: F) -> F:
    """Marks a fixture function as one that loads or converts the real embedded model."""
    setattr(function, MARKER, True)
    return function


def real_model_fixtures(item: pytest.Item) -> list[str]:
    """The fixtures this test uses that load the real model (the definition the test gets)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:  # not a python test function (a doctest, a plugin's item): no fixtures
        return []
    used = []
    for name in getattr(item, "fixturenames", ()):
        definitions = info.name2fixturedefs.get(name, ())
        if definitions and getattr(definitions[-1].func, MARKER, False):
            used.append(name)
    return sorted(used)


def unmarked_model_use(item: pytest.Item) -> str | None:
    """Why this test may not run (it uses the real model without the mark), or None."""
    if item.get_closest_marker("model") is not None:
        return None
    used = real_model_fixtures(item)
    if not used:
        return None
    return (f"{item.nodeid} uses the real embedded model (fixture {', '.join(used)}) without "
            "@pytest.mark.model: mark it, so that `-m \"not model\"` leaves it out")
