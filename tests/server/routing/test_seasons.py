"""Terms a request names by season and year (routing/arguments/seasons.py): a held-out
registrar's "Fall 2027", "spring 2027", "fall 27", "this fall (2027)" for term codes such as
`2027FA` were the enum's first value (SmolLM2) or left out."""

from __future__ import annotations

from typing import Any

import pytest
from stackroute.server.routing.arguments.candidates import candidates

TERMS = {"type": "string", "enum": ["2026FA", "2027SP", "2027SU", "2027FA", "2028SP"],
         "description": "Term code, e.g. 2027FA for Fall 2027."}


@pytest.mark.parametrize(("schema", "request_text", "value"), [
    (TERMS, "register student U20471936 for section 002 of MATH 2210 for Fall 2027", "2027FA"),
    (TERMS, "can u drop cs-101 for me this spring (spring 2027)??", "2027SP"),
    (TERMS, "waitlist BIO-2100L sec 004 fall 27, U55019372", "2027FA"),
    (TERMS, "a prereq override for econ 3400 this fall (2027)", "2027FA"),
    ({"type": "string", "pattern": "^(FA|SP|SU)[0-9]{4}$"}, "any sections in summer 2027?",
     "SU2027"),
    ({"type": "string", "pattern": "^(Fall|Spring|Summer) [0-9]{4}$"}, "in autumn 2027",
     "Fall 2027"),
])
def test_a_term_named_by_season_and_year_is_the_code_its_property_takes(
        schema: dict[str, Any], request_text: str, value: str) -> None:
    found = candidates("term", schema, request_text)
    assert found[0].value == value and found[0].prior >= 3.0


def test_a_list_of_terms_takes_the_terms_named() -> None:
    schema = {"type": "array", "items": TERMS}
    found = candidates("terms", schema, "send them verification for fall 2027 and spring 2028?")
    assert found[0].value == ["2027FA", "2028SP"]


def test_a_season_without_a_year_names_no_term() -> None:
    assert [c for c in candidates("term", TERMS, "drop it this spring") if c.prior > 0] == []


def test_a_property_that_holds_no_term_takes_none() -> None:
    # a course code's pattern takes "FA 2027" too: it is no term
    course = {"type": "string", "pattern": "^[A-Z]{2,5}[ -][0-9]{3,4}[A-Z]?$"}
    found = candidates("course_code", course, "register for section 002 of MATH 2210 for Fall 2027")
    assert found[0].value == "MATH 2210"
