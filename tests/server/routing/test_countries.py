"""Countries as the ISO 3166-1 code a property wants (routing/arguments/countries.py): an
unseen travel desk's "I'm a German citizen flying to India" left `nationality` and
`destination_country` (`^[A-Z]{2}$`) without values, so no call could be made."""

from __future__ import annotations

from typing import Any

import pytest
from doubles import LogitEngine, then_done
from stackroute.runtime.catalog import build_tree
from stackroute.server.routing.arguments.candidates import candidates
from stackroute.server.routing.arguments.countries import code_length, find_countries
from stackroute.server.routing.options import ArgumentValues, DraftSource, RouterOptions
from stackroute.server.routing.router import build_machine
from stackroute.server.tools.evaluate import Query, run_query

ALPHA_2 = {"type": "string", "pattern": "^[A-Z]{2}$"}
VISA = {"name": "r", "children": [{
    "name": "checkVisaRequirements", "description": "Whether a traveler needs a visa.",
    "parameters": {"type": "object", "required": ["nationality", "destination_country"],
                   "properties": {
                       "nationality": ALPHA_2 | {"description": "Passport country, ISO 3166-1"},
                       "destination_country": ALPHA_2 | {"description": "Destination country"},
                       "stay_days": {"type": "integer", "description": "Length of stay in days"},
                   }}}]}


@pytest.mark.parametrize(("text", "codes"), [
    ("I'm a German citizen flying to India", [("DE", True), ("IN", False)]),
    ("from the United States to the UK", [("US", False), ("GB", False)]),
    ("Vietnam, Viet Nam and the Russian Federation", [("VN", False)] * 2 + [("RU", False)]),
    ("a Nigerian and a Japanese traveler", [("NG", True), ("JP", True)]),
    ("a trip to Korea", []),  # two countries' name: neither
    ("South America in the summer", []),
    ("send us the germany report", []),  # a country is named with its capital letter
])
def test_a_request_names_countries_by_name_short_form_or_adjective(
        text: str, codes: list[tuple[str, bool]]) -> None:
    assert [(m.alpha_2, m.is_adjective) for m in find_countries(text)] == codes


@pytest.mark.parametrize(("name", "schema", "length"), [
    ("nationality", ALPHA_2, 2),
    ("origin", {"type": "string", "pattern": "^[A-Z]{3}$",
                "description": "ISO 3166-1 alpha-3 country code"}, 3),
    ("country", {"type": "string", "enum": ["DE", "FR", "NL", "IT"]}, 2),
    ("country", {"type": "string", "minLength": 2, "maxLength": 2}, 2),
    ("currency", {"type": "string", "enum": ["USD", "EUR"]}, None),  # no country
    ("country", {"type": "string"}, None),  # a country's name, not its code
    ("origin", {"type": "string", "pattern": "^[A-Z]{3}$",
                "description": "Departure airport IATA code"}, None),
])
def test_a_property_wants_a_code_where_its_schema_takes_one_and_it_speaks_of_a_country(
        name: str, schema: dict[str, Any], length: int | None) -> None:
    assert code_length(name, schema) == length


def test_the_code_is_the_candidate_and_a_peoples_adjective_is_the_nationality() -> None:
    request = "I'm a German citizen flying to India for a 10-day trip"
    siblings = {"nationality": ["destination_country"], "destination_country": ["nationality"]}
    top = {name: candidates(name, VISA["children"][0]["parameters"]["properties"][name],
                            request, siblings=others)[:2]
           for name, others in siblings.items()}
    assert [c.text for c in top["nationality"]] == ["DE", "IN"]
    assert [c.text for c in top["destination_country"]] == ["IN", "DE"]
    assert code_length("origin", {"pattern": "^[A-Z]{3}$", "description": "country"}) == 3
    alpha_3 = candidates("origin", {"type": "string", "pattern": "^[A-Z]{3}$",
                                    "description": "ISO 3166-1 alpha-3 country"}, request)
    assert [c.text for c in alpha_3][:2] == ["DEU", "IND"]


def test_an_enum_of_codes_takes_the_country_the_request_names() -> None:
    found = candidates("country", {"type": "string", "enum": ["DE", "FR", "NL", "IT"]},
                       "Export the VAT report for Germany, Q3 2026")
    assert (found[0].text, found[0].kind) == ("DE", "enum") and found[0].prior > 0
    assert all(c.prior <= 0 for c in found[1:])  # the rest of the enum: a menu, no match


def test_the_embedded_default_makes_the_call_with_both_codes() -> None:
    options = RouterOptions(recovery=None, speculation=DraftSource.OFF,
                            argument_values=ArgumentValues.PRIORS)
    engine = LogitEngine(then_done({"checkVisaRequirements": 5.0}))
    state = run_query(build_machine(build_tree(VISA), engine, options=options),
                      Query(id="q", query="I'm a German citizen flying to India for 10 days. "
                            "Do I need a visa?", gold=(), args=None, tags=()))
    assert state.calls[0]["arguments"] == {"nationality": "DE", "destination_country": "IN",
                                           "stay_days": 10}
