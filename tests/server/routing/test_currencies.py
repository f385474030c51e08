"""Currency codes the request writes (routing/arguments/currencies.py): a held-out HR desk's
"pay band 140k-165k CAD" left the job posting's optional `currency` (`^[A-Z]{3}$`) out; a
held-out logistics desk's "a claim with the carrier for $3,400" asked for its required one."""

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


@pytest.mark.parametrize(("request_text", "codes"), [
    ("want to put in a claim with the carrier for $3,400", ["USD"]),
    ("a refund of 20 euros", ["EUR"]),
    ("credit €15 to the account", ["EUR"]),
    ("£250 deposit", ["GBP"]),
    ("it came to 40 bucks", ["USD"]),
    ("C$1,200 for the season", ["CAD"]),
    ("1,200 Canadian dollars", ["CAD"]),
    ("AU$90 a month", ["AUD"]),
    ("US$75", ["USD"]),
    ("₹500 top-up", ["INR"]),
    ("wire 900 usd today", ["USD"]),  # a code in lower case, written once
    # a dollar of a country the reading does not know is no code; "pounds" may be a weight
    ("3,000 Jamaican dollars", []),
    ("a 20 pound parcel", []),
])
def test_a_currency_the_request_writes_as_a_sign_or_a_word_is_its_code(
        request_text: str, codes: list[str]) -> None:
    found = [c.text for c in candidates("currency", CODE, request_text) if c.kind == "currency"]
    assert found == codes


def test_a_sign_is_read_for_a_currency_enum() -> None:
    schema = {"type": "string", "enum": ["USD", "EUR", "GBP"]}
    found = candidates("currency", schema, "claim for $3,400")
    assert found[0].value == "USD" and found[0].prior > 0


def test_a_written_code_fills_an_optional_currency_without_none() -> None:
    properties = {"title": {"type": "string"}, "currency": CODE}
    request = "Open a req for a Data Engineer, pay band 140k-165k CAD."
    found = candidates("currency", CODE, request, siblings=("title",))
    offer = offered("currency", properties, found, request, set())
    assert offer == Offer([c for c in found if c.text == "CAD"], may_decline=False)


@pytest.mark.parametrize("request_text", ["a 40 bucks fee", "a 2,500 usd deductible",
                                          "a 2,500 dollar deductible"])
def test_any_money_word_labels_an_amount_before_its_property_name(request_text: str) -> None:
    """One table of money words serves every reader: "bucks" and "usd" label an amount before
    its property's name as "dollar" does (cues.LABELS_BEFORE knew only five words)."""
    schema = {"type": "number"}
    name = "fee" if "fee" in request_text else "deductible"
    top = max(candidates(name, schema, request_text), key=lambda c: c.prior)
    assert top.value in (40, 2500) and top.prior >= 2.0


def test_a_currency_whose_description_gives_codes_as_examples_takes_a_code() -> None:
    # Seal-Tools dev-easy-138: "in terms of euros (EUR)" for a `currency` described "(e.g.,
    # USD, EUR)" took "euros"
    schema = {"type": "string",
              "description": "The desired currency for the market size (e.g., USD, EUR)"}
    found = candidates("currency", schema, "the clothing market in China in terms of euros (EUR)")
    assert found[0].value == "EUR"
