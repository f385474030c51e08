"""Whether the request names an optional property (routing/arguments/support.py, where the
model chooses): a word of the property's name said as a word of the request, not inside
another word ("age" in "message", "add" in "address"), and not the name a sibling's value is
labelled by ("checkout" is new_check_out's, not new_check_in's)."""

from __future__ import annotations

from typing import Any

import pytest
from stackroute.server.routing.arguments.candidate import Candidate
from stackroute.server.routing.arguments.support import Offer, offered

HELLO = Candidate("hello", "hello", "quoted", 0.5, (23, 28))


@pytest.mark.parametrize("name, request_text", [
    ("age", "Send the message 'hello' to the team."),
    ("tag", "Post 'hello' on the stage channel."),
    ("name", "Log in with username 'hello' today."),
])
def test_a_word_inside_another_word_does_not_name_the_property(
        name: str, request_text: str) -> None:
    offer = offered(name, {name: {"type": "string"}}, [HELLO], request_text, set())
    assert offer == Offer([], may_decline=True)


@pytest.mark.parametrize("request_text", [
    "Send the tag 'hello' to the team.",
    "Add the tags 'hello' to the post.",
])
def test_the_propertys_own_word_names_it(request_text: str) -> None:
    offer = offered("tag", {"tag": {"type": "string"}}, [HELLO], request_text, set())
    assert offer == Offer([HELLO], may_decline=True)


def test_a_siblings_name_as_one_word_does_not_name_this_property() -> None:
    properties: dict[str, Any] = {"new_check_in": {"type": "string"},
                                  "new_check_out": {"type": "string"}}
    room = Candidate("suite 4", "suite 4", "span", 0.5, (30, 37))
    request = "Move my checkout for the room suite 4 to Friday."
    assert offered("new_check_in", properties, [room], request, set()) == Offer([], True)
    assert offered("new_check_out", properties, [room], request, set()) == Offer([room], True)


def test_a_flag_is_set_only_where_its_own_word_is_said() -> None:
    # "address" says no "add": the flag's value stays out of the offer
    flag = Candidate(True, "true", "boolean", 1.0)
    properties = {"add_insurance": {"type": "boolean"}}
    request = "Rent a car delivered to my address."
    assert offered("add_insurance", properties, [flag], request, set()).candidates == []
    request = "Rent a car and add insurance."
    assert offered("add_insurance", properties, [flag], request, set()) == Offer([flag], False)


def test_a_name_after_by_supports_the_maker_of_a_work() -> None:
    """A held-out city desk: '"The Overstory" by Richard Powers' left `author` out."""
    request = 'Place a hold on "The Overstory" by Richard Powers at the Riverside branch.'
    start = request.index("Richard")
    name = Candidate("Richard Powers", "Richard Powers", "span", 2.5, (start, start + 14))
    properties: dict[str, Any] = {"title": {"type": "string"}, "author": {"type": "string"}}
    assert offered("author", properties, [name], request, set()) == Offer([name], True)
    assert offered("title", properties, [name], request, set()) == Offer([], True)
