"""Patterns a catalog may not use because Python's `re` backtracks on them without bound
(issue 15.5), and the ones it may: a table of inputs and verdicts."""

from __future__ import annotations

import pytest
from stackroute.runtime.schema_hazards import schema_hazard


def hazard(pattern: str) -> str | None:
    return schema_hazard({"type": "object", "properties": {"q": {"type": "string",
                                                                 "pattern": pattern}}})


@pytest.mark.parametrize("pattern", [
    r"^(a+)+$",  # the known one
    r"^(a|a)*$",  # overlapping alternation under a repeat: 1.47 s on 25 characters
    r"^(a{1,9}){1,9}$",  # nested bounded repeats: 2.66 s on 41
    r"^(ab|abc?)*$",  # alternatives that can match the same text ("ab")
    r"^(.|x)*y$",
    r"^(a?){1,30}a{30}$",  # many optional steps under a wide bounded repeat
])
def test_catastrophic_patterns_are_refused(pattern: str) -> None:
    problem = hazard(pattern)
    assert problem is not None and "backtrack" in problem


@pytest.mark.parametrize("pattern", [
    r"^\d+$",
    r"^(foo|bar)+$",  # alternatives that cannot start alike
    r"^(\d{1,3}\.){3}\d{1,3}$",  # an IPv4 address: a fixed outer count
    r"^[a-z]{2,8}(-[a-z]{2,8}){0,3}$",
    r"^(a|b)*$",  # one character class after parsing
    r"^(\w|\d)+$",  # the same: [\w\d]+
    r"^(ab|a)*c$",  # the next character decides: linear
    r"^(?:[A-Z][a-z]++ ?){1,4}$",  # names, with a possessive inner repeat
    r"^(a++)+$",  # possessive: cannot backtrack
    r"^(?>a+)+$",
])
def test_ordinary_patterns_pass(pattern: str) -> None:
    assert hazard(pattern) is None
