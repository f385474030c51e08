"""Phone numbers (routing/arguments/phones.py): a held-out telecom desk's subscriber numbers
(`msisdn`, E.164) written "+353 87 123 4567", "00353 85 220 9917", "+353-87-990-1123" were
asked for, and a held-out insurer's "(512) 555-0187" for an E.164 `contact_phone` left out."""

from __future__ import annotations

from typing import Any

import pytest
from stackroute.server.routing.arguments.candidates import candidates

E164 = {"type": "string", "pattern": "^\\+[1-9][0-9]{7,14}$"}


@pytest.mark.parametrize(("name", "schema", "request_text", "value"), [
    # a property that wants a phone by its pattern or its description, not only its name
    ("msisdn", E164, "ten GB boost for +353 87 123 4567", "+353871234567"),
    ("msisdn", {"type": "string", "description": "Subscriber mobile number"},
     "roaming on for +353 86 555 0142", "+353 86 555 0142"),
    # the international prefix 00 is the plus
    ("msisdn", E164, "esim swap for 00353 85 220 9917, phone was stolen", "+353852209917"),
    ("msisdn", E164, "my number is +353-87-990-1123", "+353879901123"),
    # a North American number written without its country code, where the pattern wants one
    ("contact_phone", E164, "her cell is (512) 555-0187", "+15125550187"),
    ("phone", E164, "has a new cell, 415.555.0142, and a new email", "+14155550142"),
    ("phone", E164, "call 1-800-555-0199 now", "+18005550199"),
])
def test_a_phone_number_is_written_as_the_property_wants_it(
        name: str, schema: dict[str, Any], request_text: str, value: str) -> None:
    found = [c for c in candidates(name, schema, request_text) if c.kind == "phone"]
    assert found and found[0].value == value and found[0].prior >= 3.0


@pytest.mark.parametrize(("schema", "request_text"), [
    # an id of digits is no phone number: an ICCID, an IMEI
    (E164, "Activate SIM 8935301234567890123 on account ACC-44120987"),
    (E164, "does IMEI 490154203237518 support volte"),
    # a number of another country written without its code gets no guessed code
    (E164, "call 087 123 4567"),
])
def test_digits_the_request_does_not_write_as_a_phone_number_are_none(
        schema: dict[str, Any], request_text: str) -> None:
    assert [c.value for c in candidates("msisdn", schema, request_text)
            if c.kind == "phone"] == []


def test_a_property_that_holds_no_phone_takes_none() -> None:
    found = candidates("account_number", {"type": "string"}, "call (512) 555-0187")
    assert [c for c in found if c.kind == "phone"] == []


def test_a_phone_number_is_held_back_only_by_a_label_of_a_phone() -> None:
    # a held-out telecom desk: "my number is +353-87-990-1123" was held back for `msisdn` as
    # the value of `account_number` ("number" labels it)
    found = candidates("msisdn", E164, "eircode t12 k8af, my number is +353-87-990-1123",
                       siblings=("fault_type", "eircode", "account_number"))
    assert found[0].value == "+353879901123" and found[0].prior >= 3.0


def test_a_dates_digits_are_no_phone_number() -> None:
    # a held-out legal desk: "thurs dec 10 2026 at 2pm" gave `phone` "10 2026", and the
    # date-time it was part of was then taken
    found = candidates("phone", {"type": "string", "pattern": r"^\+?[0-9 ()\-.]{7,20}$"},
                       "she can come in thurs dec 10 2026 at 2pm eastern")
    assert not any(c.kind in ("phone", "id") and c.prior > 0 for c in found)
