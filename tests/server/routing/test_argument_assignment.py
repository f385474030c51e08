"""The request's values as a whole (routing/arguments/): literals, the words that label them,
and the assignment of values to properties that `ArgumentValues.PRIORS` takes."""

from __future__ import annotations

from typing import Any

import pytest
from doubles import LogitEngine, then_done
from stackroute.runtime.catalog import build_tree
from stackroute.server.routing.arguments.assignment import assign_values
from stackroute.server.routing.arguments.candidates import Candidate, candidates
from stackroute.server.routing.arguments.literals import find_literals
from stackroute.server.routing.options import ArgumentValues, DraftSource, RouterOptions
from stackroute.server.routing.router import build_machine
from stackroute.server.tools.evaluate import Query, run_query


@pytest.mark.parametrize(("text", "expected"), [
    ("open https://example.com/a.png, then www.example.org.",
     [("url", "https://example.com/a.png"), ("url", "www.example.org")]),
    ("ping 10.0.0.12 and 192.168.1.1:8080.", [("ip", "10.0.0.12"), ("ip", "192.168.1.1:8080")]),
    ('deploy "app.py" and read /home/ana/data.csv or C:\\logs\\today.log',
     [("file", "app.py"), ("path", "/home/ana/data.csv"), ("path", "C:\\logs\\today.log")]),
    # abbreviations, versions, domains and e-mails are not literals of these kinds
    ("e.g. the U.S. office runs version 1.2.3 of example.com; mail ana@site.org", []),
])
def test_literals_are_found_whole(text: str, expected: list[tuple[str, str]]) -> None:
    assert [(lit.kind, lit.text) for lit in find_literals(text)] == expected


@pytest.mark.parametrize(("name", "request_text", "expected"), [
    # a literal beats the words that name it ("IP", "URL")
    ("server", "Deploy the file to the server at IP address 192.168.77.71.", "192.168.77.71"),
    ("image", 'Read the text in the image at the URL "https://example.com/scan.png".',
     "https://example.com/scan.png"),
    # a later sentence's verb is not a name ("Choose PayPal"), and "as" labels a value
    ("payment_method", "Enroll me in the Cooking Course. Choose PayPal as the payment method.",
     "PayPal"),
])
def test_a_literal_or_a_labelled_value_leads(name: str, request_text: str,
                                             expected: str) -> None:
    assert candidates(name, {"type": "string"}, request_text)[0].text == expected


def test_a_noun_phrase_is_offered_before_its_head_alone() -> None:
    texts = [c.text for c in candidates("habitat", {"type": "string"},
                                        "Count the birds living in the coastal wetlands.")]
    assert texts.index("coastal wetlands") < texts.index("wetlands")
    # a number or an id after its label is no piece of a phrase
    found = candidates("isbn", {"type": "string"},
                       "Look up the novel with ISBN number 9781234567897.")
    assert found[0].text == "9781234567897"


def value(text: str, prior: float, at: int | None = None) -> Candidate:
    span = None if at is None else (at, at + len(text))
    return Candidate(text, text, "span", prior, span)


def test_a_value_goes_to_the_property_it_fits_best() -> None:
    # greedy in order: product takes "Germany" (1.5) and leaves country "furniture" (0.0)
    product = [value("Germany", 1.5, 40), value("furniture", 0.0, 20)]
    country = [value("Germany", 2.5, 40), value("furniture", 0.0, 20)]
    picked = assign_values([product, country], [False, False])
    assert [c.text for c in picked if c] == ["furniture", "Germany"]


def test_a_name_is_not_split_over_two_properties_to_raise_a_sum() -> None:
    # the highest sum would be athlete "Messi" (0.5) + sport "Lionel" (0.5); a name held by
    # the earlier property on a tie keeps it, and the other takes its next free value
    athlete = [value("Lionel Messi", 1.7, 30), value("Lionel", 0.5, 30),
               value("Messi", 0.5, 37), value("performance", -1.5, 13)]
    sport = [value("Lionel Messi", 1.7, 30), value("Lionel", 0.5, 30),
             value("Messi", 0.5, 37), value("performance", -1.5, 13)]
    picked = assign_values([athlete, sport], [False, False])
    assert [c.text for c in picked if c] == ["Lionel Messi", "performance"]


def test_a_value_is_reused_only_where_nothing_else_is_left() -> None:
    first = [value("Asha", 3.0, 10)]
    second = [value("Asha", 3.0, 10), value("Li", -2.0, 30)]
    assert [c.text for c in assign_values([first, second], [False, False]) if c] == \
        ["Asha", "Li"]
    assert [c.text for c in assign_values([first, first], [False, False]) if c] == \
        ["Asha", "Asha"]  # a required property with nothing else still gets a value
    # an optional property stays out rather than repeat a value, or take one below zero
    assert assign_values([first, first], [False, True])[1] is None
    assert assign_values([first, second], [False, True])[1] is None


def test_a_word_said_twice_can_be_two_values() -> None:
    likelihood = [value("low", 4.5, 40)]
    risk = [value("low", 4.5, 90)]
    assert [c.text for c in assign_values([likelihood, risk], [False, False]) if c] == \
        ["low", "low"]


IMPORTS = {"name": "r", "children": [{
    "name": "assessImportRisk", "description": "Assess the risk of imports.",
    "parameters": {"type": "object", "properties": {
        "product": {"type": "string"}, "country": {"type": "string"},
        "notes": {"type": "string"}},
        "required": ["product", "country"]}}]}


def test_priors_fill_the_call_by_the_assignment() -> None:
    engine = LogitEngine(then_done({"assessImportRisk": 5.0, "DONE": 0.0}))
    options = RouterOptions(recovery=None, speculation=DraftSource.OFF,
                            argument_values=ArgumentValues.PRIORS)
    machine = build_machine(build_tree(IMPORTS), engine, options=options)
    state: Any = run_query(machine, Query(
        id="q", query="Assess the risk for furniture imports in Germany.", gold=(), args=None,
        tags=()))
    assert state.calls[0]["arguments"] == {"product": "furniture", "country": "Germany"}
