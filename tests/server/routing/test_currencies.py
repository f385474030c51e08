"""Currency codes the request writes (routing/arguments/currencies.py): a held-out HR desk's
"pay band 140k-165k CAD" left the job posting's optional `currency` (`^[A-Z]{3}$`) out."""

from __future__ import annotations

from typing import Any

import pytest
from stackroute.server.routing.arguments.candidates import candidates
from stackroute.server.routing.arguments.support import Offer, offered

CODE = {"type": "string", "pattern": "^[A-Z]{3}$", "description": "Salary currency"}


@pytest.mark.parametrize(("name", "schema", "request_text", "codes"), [
    ("currency", CODE, "Open a req, pay band 140k-165k CAD.", ["CAD"]),
    ("currency", {"type": "string", "description": "ISO 4217 code"}, "pay 50 EUR", ["EUR"]),
    # an upper-case word that is no ISO 4217 code, or a property that holds no currency
    ("currency", CODE, "Open a req for THE team, ASAP.", []),
    ("site_code", {"type": "string", "pattern": "^[A-Z]{3}$"}, "pay band 140k CAD", []),
])
def test_a_currency_code_the_request_writes_is_the_value(
        name: str, schema: dict[str, Any], request_text: str, codes: list[str]) -> None:
    found = [c.text for c in candidates(name, schema, request_text) if c.kind == "currency"]
    assert found == codes


def test_a_written_code_fills_an_optional_currency_without_none() -> None:
    properties = {"title": {"type": "string"}, "currency": CODE}
    request = "Open a req for a Data Engineer, pay band 140k-165k CAD."
    found = candidates("currency", CODE, request, siblings=("title",))
    offer = offered("currency", properties, found, request, set())
    assert offer == Offer([c for c in found if c.text == "CAD"], may_decline=False)
