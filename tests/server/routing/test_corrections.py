"""A value the request corrects as it goes ("4,500 … wait, make that 4,800") is held back for
the value that corrects it; words that only sound like a correction correct nothing."""

from __future__ import annotations

from typing import Any

import pytest
from stackroute.server.routing.arguments.candidates import candidates
from stackroute.server.routing.arguments.enums import enum_candidates
from stackroute.server.routing.arguments.request_text import RequestText


def best(name: str, schema: dict[str, Any], request: str) -> Any:
    return candidates(name, schema, request)[0].value


@pytest.mark.parametrize(("name", "schema", "request_text", "value"), [
    ("points", {"type": "integer"},
     "Can you add the 4,500 points he's owed? Wait, make that 4,800, I forgot the bonus.", 4800),
    ("measured_value", {"type": "number"},
     "the high control came in at 38.7, sorry, 37.8, I transposed the digits", 37.8),
    ("min_nights", {"type": "integer"},
     "I think they said 2 nights... no, it was 3, I just double-checked.", 3),
    ("box", {"type": "string"}, "box 12, actually make that box 14, 12 is full", "14"),
    ("arrival", {"type": "string", "format": "date"},
     "arriving March 3, 2027, I mean March 4, 2027", "2027-03-04"),
])
def test_the_value_a_correction_gives_is_the_one_meant(name: str, schema: dict[str, Any],
                                                       request_text: str, value: Any) -> None:
    assert best(name, schema, request_text) == value


@pytest.mark.parametrize(("name", "request_text", "value"), [
    ("rooms", "2 rooms, actually make it 3 nights", 2),  # two things, no correction
    ("nights", "3 nights, not 2", 3),  # "X, not Y" keeps X
    ("guests", "4 guests and no pets. Room 12 is fine", 4),  # "no pets" corrects nothing
])
def test_what_only_sounds_like_a_correction_corrects_nothing(name: str, request_text: str,
                                                             value: Any) -> None:
    assert best(name, {"type": "integer"}, request_text) == value


def test_an_enum_value_the_request_corrects_is_held_back() -> None:
    found = enum_candidates(["low", "normal", "high", "urgent"], RequestText.read(
        "Put it as high priority, actually no, make it urgent."))
    assert max(found, key=lambda c: c.prior).value == "urgent"
    found = enum_candidates(["low", "high"], RequestText.read("high priority, thanks"))
    assert [c.value for c in found] == ["high"]
