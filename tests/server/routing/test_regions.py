"""States and provinces a request names (routing/arguments/regions.py): a held-out insurer's
"Texas license 31457789" left the driver's `license_state` ("Two-letter US state code") out."""

from __future__ import annotations

from typing import Any

import pytest
from stackroute.server.routing.arguments.candidates import candidates

STATE = {"type": "string", "pattern": "^[A-Z]{2}$",
         "description": "Two-letter US state code of the issuing state."}


@pytest.mark.parametrize(("name", "schema", "request_text", "value"), [
    ("license_state", STATE, "DOB 04/22/1990, Texas license 31457789, effective Aug 15", "TX"),
    ("state", {"type": "string", "maxLength": 2, "minLength": 2}, "a house in New Mexico",
     "NM"),
    ("province", {"type": "string", "pattern": "^[A-Z]{2}$"}, "ship it to British Columbia",
     "BC"),
    ("state", {"type": "string", "enum": ["CA", "NY", "TX"]}, "moving to new york", "NY"),
])
def test_a_state_the_request_names_is_the_code_its_property_wants(
        name: str, schema: dict[str, Any], request_text: str, value: str) -> None:
    found = candidates(name, schema, request_text)
    assert found[0].value == value and found[0].prior >= 3.0


@pytest.mark.parametrize(("name", "schema", "request_text"), [
    # a property that wants no state code, or no code
    ("country", {"type": "string", "pattern": "^[A-Z]{2}$"}, "a house in Texas"),
    ("license_state", {"type": "string"}, "a Texas license"),
    # a state written inside another name is no state: George Washington
    ("state", STATE, "a portrait of George Washington"),
])
def test_no_state_code_where_none_is_wanted(name: str, schema: dict[str, Any],
                                           request_text: str) -> None:
    assert [c for c in candidates(name, schema, request_text) if c.kind == "region"] == []
