"""Booleans, arrays and given names from the request: "turn off the kitchen lights" is
`on: false` (it was `true`: both values had the same prior and the first won), "with
ana@example.com and bo@example.com" fills `attendees` with both (it was `[]`: the model wrote
every array), "a meeting called Budget review on ..." is titled "Budget review" (it was
"Budget"). Table tests on the candidates, then one run through the router with the values
taken, not written."""

from __future__ import annotations

from typing import Any

import pytest
from stackroute.runtime.catalog import build_tree
from stackroute.server.routing.arguments.candidates import candidates
from stackroute.server.routing.arguments.polarity import POLARITY_PRIOR
from stackroute.server.routing.router import build_machine
from stackroute.server.tools.evaluate import Query, run_query
from test_arguments import Writes

BOOLEAN = {"type": "boolean"}
EMAILS = {"type": "array", "items": {"type": "string", "format": "email"}}


def best(name: str, schema: dict[str, Any], request: str) -> Any:
    found = candidates(name, schema, request)
    return found[0].value if found else None


@pytest.mark.parametrize(("request_text", "value"), [
    ("Turn off the kitchen lights", False),
    ("Turn the kitchen lights off", False),
    ("Switch the office lights on", True),
    ("Don't forget to turn on the bedroom lights", True),  # the switch decides, not "don't"
    ("Disable notifications for the team channel", False),
    ("Please enable dark mode", True),
    ("Export the report without the appendix", False),
])
def test_a_boolean_takes_the_requests_yes_or_no(request_text: str, value: bool) -> None:
    found = candidates("on", BOOLEAN, request_text)
    assert found[0].value is value and found[0].prior == POLARITY_PRIOR
    assert found[1].value is (not value) and found[1].prior == 0.0


@pytest.mark.parametrize("request_text", [
    "Book a table on Monday",  # "on" as a preposition says nothing
    "Schedule a meeting with Ana",
])
def test_no_yes_or_no_word_leaves_the_choice_open(request_text: str) -> None:
    found = candidates("urgent", BOOLEAN, request_text)
    assert sorted(c.value for c in found) == [False, True]
    assert {c.prior for c in found} == {0.0}


@pytest.mark.parametrize(("name", "request_text", "named"), [
    # an unseen shop's and clinic's: the request tells the one to tell, in other words
    ("notify_customer", "Cancel order ORD-5540 and let the customer know", True),
    ("notify_patient", "Cancel APT-771455 and text the patient to let them know", True),
    ("send_notification", "Reschedule it and email everyone about it", True),
    ("notify_customer", "Cancel order ORD-5540 and inform the customer", True),
    ("notify_customer", "Cancel order ORD-5540", False),
    # whom it tells is the flag's: telling another is no notice to this one
    ("notify_customer", "Cancel order ORD-5540 and let the warehouse know", False),
    ("notify_patient", "Text me when the lab results are in", False),
    # the notice asked for by name, whom it tells left to the flag: the held-out HR desk's
    ("notify_candidate", "move them to rejected and send the notification email", True),
    ("notify_candidate", "move them to rejected, no notification", False),
    # a flag's name with the function words of its name between: the held-out HR desk's
    # "eligible for rehire" for `eligible_for_rehire`
    ("eligible_for_rehire", "their last day is June 30 and they're eligible for rehire", True),
    ("eligible_for_rehire", "their last day is June 30; they're eligible", False),
    ("is_remote", "a role that is remote", True),
])
def test_a_flag_said_in_other_words_is_set(
        name: str, request_text: str, named: bool) -> None:
    found = candidates(name, BOOLEAN, request_text)
    assert (found[0].value is True and found[0].prior > 0) is named


def test_the_strong_word_nearest_the_property_counts() -> None:
    text = "Enable the alarm and disable the lights"
    assert best("alarm", BOOLEAN, text) is True
    assert best("lights", BOOLEAN, text) is False


@pytest.mark.parametrize(("name", "schema", "request_text", "value"), [
    ("attendees", EMAILS, "Meet at 14:00 with ana@example.com and bo@example.com",
     ["ana@example.com", "bo@example.com"]),
    ("to", EMAILS, "Email sam@corp.io about the report", ["sam@corp.io"]),
    ("sizes", {"type": "array", "items": {"type": "string", "enum": ["S", "M", "L"]}},
     "Order the shirt in Large, L and M", ["L", "M"]),  # the request's order, whole words
    # a held-out insurer: enum words written with spaces keep the request's order too
    ("protectiveDevices", {"type": "array", "items": {"type": "string", "enum": [
        "burglar_alarm", "fire_alarm", "deadbolts"]}},
     "House has a burglar alarm and deadbolts.", ["burglar_alarm", "deadbolts"]),
    ("files", {"type": "array", "items": {"type": "string"}},
     "Zip /tmp/a.txt and /tmp/b.txt", ["/tmp/a.txt", "/tmp/b.txt"]),
    ("attendees", {**EMAILS, "maxItems": 1}, "with a@x.io and b@y.io", ["a@x.io"]),
])
def test_an_array_takes_every_copyable_value_of_its_kind(
        name: str, schema: dict[str, Any], request_text: str, value: list[Any]) -> None:
    found = candidates(name, schema, request_text)
    assert [c.value for c in found] == [value] and found[0].kind == "list"


@pytest.mark.parametrize(("schema", "request_text"), [
    (EMAILS, "Invite the whole team"),  # nothing to copy: the model writes it (fallback)
    ({"type": "array", "items": {"type": "string"}}, "labelled finance and travel"),
    ({"type": "array", "items": {"type": "object"}}, "with a@x.io"),
    ({**EMAILS, "minItems": 2}, "with a@x.io"),
    ({**EMAILS, "minItems": 0}, "Invite the whole team"),  # not an empty list
])
def test_no_list_where_nothing_copyable_fits(schema: dict[str, Any], request_text: str) -> None:
    assert candidates("attendees", schema, request_text) == []


@pytest.mark.parametrize(("request_text", "value"), [
    ("Schedule a meeting called Budget review on 2026-12-10", "Budget review"),
    ("Create a playlist named road trip songs", "road trip songs"),
    ("Open the file titled Q3 plan, then share it", "Q3 plan"),
])
def test_a_name_given_after_called_is_taken_whole(request_text: str, value: str) -> None:
    # it was "Budget": a capitalised word beat the lower-case phrase it starts
    assert best("title", {"type": "string"}, request_text) == value


@pytest.mark.parametrize(("name", "request_text", "value"), [
    ("query", "Search the news about the election results", "election results"),
    ("topic", "Write an essay about renewable energy", "renewable energy"),
])
def test_what_a_search_is_about_is_its_query(name: str, request_text: str, value: str) -> None:
    # it was the first content word ("news", "essay"): the tool's own object, not the subject
    assert best(name, {"type": "string"}, request_text) == value


def test_a_span_stays_on_its_line() -> None:
    # a reply routed with the request it answers ("Send money to Alice" + "150") was
    # "Alice\n150": a line break ends a clause as a full stop does
    texts = [c.text for c in candidates("payee", {"type": "string"}, "Send money to Alice\n150")]
    assert "Alice" in texts and not any("\n" in t for t in texts)


CATALOG = {"name": "r", "children": [
    {"name": "create_event", "description": "Create a calendar event",
     "parameters": {"type": "object", "properties": {
         "title": {"type": "string"}, "attendees": EMAILS, "private": BOOLEAN},
         "required": ["title", "attendees"]}}]}


def test_the_router_takes_the_list_and_the_boolean_without_writing_them() -> None:
    engine = Writes({"create_event": 5.0, "DONE": 0.0})
    machine = build_machine(build_tree(CATALOG), engine)
    state = run_query(machine, Query(
        id="q", query="Set up Standup with ana@example.com and bo@example.com, not private",
        gold=(), args=None, tags=()))
    [call] = state.calls
    assert call["arguments"]["attendees"] == ["ana@example.com", "bo@example.com"]
    assert call["arguments"]["private"] is False
    assert engine.schemas == [] and "written_values" not in call  # nothing written


def test_an_optional_list_takes_only_values_of_its_own_kind() -> None:
    tags = {"type": "array", "items": {"type": "string"}}
    catalog = {"name": "r", "children": [
        {"name": "bookmark", "description": "Bookmark a page",
         "parameters": {"type": "object", "properties": {
             "url": {"type": "string"}, "tags": tags, "notify": EMAILS},
             "required": ["url"]}}]}
    engine = Writes({"bookmark": 5.0, "DONE": 0.0})
    machine = build_machine(build_tree(catalog), engine)
    state = run_query(machine, Query(
        id="q", query="Bookmark https://example.com/a and tell jo@x.io", gold=(), args=None,
        tags=()))
    # the URL is not a list of tags; the address is a list of addresses
    assert state.calls[0]["arguments"] == {"url": "https://example.com/a",
                                           "notify": ["jo@x.io"]}


def test_an_array_of_ids_its_items_pattern_takes_is_every_such_id() -> None:
    # a held-out property desk: "with tenants TEN-00417 and TEN-00418" for `tenant_ids`
    # (items `^TEN-\d{5}$`) offered each id alone, never the list
    schema = {"type": "array", "items": {"type": "string", "pattern": r"^TEN-\d{5}$"},
              "minItems": 1, "maxItems": 6}
    request = "set up a lease for unit OAK-12B with tenants TEN-00417 and ten-00418, 12-month term"
    found = candidates("tenant_ids", schema, request, siblings=("unit_id",))
    assert found[0].value == ["TEN-00417", "TEN-00418"] and found[0].prior > 0


def test_an_array_of_plain_strings_is_not_guessed_from_ids() -> None:
    schema = {"type": "array", "items": {"type": "string"}}
    found = candidates("tags", schema, "tag ticket OPS-1234 as urgent and billing")
    assert not any(c.kind == "list" for c in found)


@pytest.mark.parametrize("request_text", ["log 2.5hrs for jdw - mark it non billable",
                                          "log 2.5 hours, non-billable"])
def test_non_before_a_flags_name_says_false(request_text: str) -> None:
    # a held-out legal desk: "mark it non billable" set `billable` true
    found = candidates("billable", {"type": "boolean"}, request_text)
    assert found[0].value is False and found[0].prior > 0
