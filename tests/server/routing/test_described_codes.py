"""Codes a property's description explains (routing/arguments/described_codes.py): a held-out
restaurant group's `location_code` ("Three-letter location code: ... (Downtown), ...") was
asked for, or left out, on six of its eighteen requests, each of which named the location
("at our Harbor location", "the airport spot"); one took "LLP" of a client's name instead."""

from __future__ import annotations

from typing import Any

import pytest
from doubles import LogitEngine, then_done
from stackroute.runtime.catalog import build_tree
from stackroute.server.routing.arguments.candidates import candidates
from stackroute.server.routing.arguments.described_codes import described_codes
from stackroute.server.routing.options import ArgumentValues, DraftSource, RouterOptions
from stackroute.server.routing.router import build_machine
from stackroute.server.tools.evaluate import Query, run_query

SITE = {"type": "string", "pattern": "^[A-Z]{3}$",
        "description": "Site code: NWK (Newark), DAL (Dallas), ONT (Ontario airport), "
                       "SEA (Seattle north), SES (Seattle south)."}
TRANSFER = {"name": "r", "children": [{
    "name": "transferStock", "description": "Move stock between sites.",
    "parameters": {"type": "object", "required": ["from_site", "to_site", "quantity"],
                   "properties": {"from_site": SITE, "to_site": SITE,
                                  "quantity": {"type": "integer"},
                                  "carrier": {"type": "string"}}}}]}


@pytest.mark.parametrize(("description", "pairs"), [
    (SITE["description"], {"NWK": "Newark", "DAL": "Dallas", "ONT": "Ontario airport",
                           "SEA": "Seattle north", "SES": "Seattle south"}),
    ("One of: Newark (NWK), Dallas (DAL)", {"NWK": "Newark", "DAL": "Dallas"}),
    ("Tier. GLD = gold member; SLV = silver member", {"GLD": "gold member",
                                                      "SLV": "silver member"}),
    ("ISO code, e.g. USD.", {}),  # no table
    ("Format such as JSON (default).", {}),  # one code: an example
    ("Lane: AB (east) or AB (west)", {}),  # one code, two meanings
])
def test_a_description_lists_codes_with_their_meanings(description: str,
                                                       pairs: dict[str, str]) -> None:
    assert described_codes(description) == pairs


@pytest.mark.parametrize(("text", "value"), [
    ("ship 40 pallets out of Dallas", "DAL"),
    ("the airport dock is short on gloves", "ONT"),  # a word only that meaning holds
    ("send it to our seattle north site", "SEA"),
])
def test_a_request_that_says_the_meaning_gives_the_code(text: str, value: str) -> None:
    found = candidates("site", SITE, text)
    assert found[0].value == value and found[0].prior >= 3.0


@pytest.mark.parametrize(("schema", "text"), [
    (SITE, "ship it from Seattle"),  # a word two meanings hold says neither
    ({"type": "string", "description": "A site code."}, "ship it from Dallas"),
])
def test_no_code_where_no_meaning_is_said(schema: dict[str, Any], text: str) -> None:
    assert [c for c in candidates("site", schema, text) if c.kind == "code"] == []


def test_the_embedded_default_makes_the_call_with_both_codes() -> None:
    options = RouterOptions(recovery=None, speculation=DraftSource.OFF,
                            argument_values=ArgumentValues.PRIORS)
    engine = LogitEngine(then_done({"transferStock": 5.0}))
    state = run_query(build_machine(build_tree(TRANSFER), engine, options=options),
                      Query(id="q", query="Move 12 cases from Newark to the airport dock",
                            gold=(), args=None, tags=()))
    assert state.calls[0]["arguments"] == {"from_site": "NWK", "to_site": "ONT",
                                           "quantity": 12}
