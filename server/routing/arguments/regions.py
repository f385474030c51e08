"""States and provinces a request names, as the two-letter code a property wants.

A property wants a state code where its name or description speaks of a state or a province
and its schema takes two capital letters (a pattern such as `^[A-Z]{2}$`, an exact length of
2, or an enum of such codes): "Texas license 31457789" is TX for `license_state`. The names
are the United States' states, district and territories and Canada's provinces and
territories, from `pycountry`'s ISO 3166-2 list; a name inside a longer capitalised name
("George Washington") names no state.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

import pycountry
from stackroute.server.embeddings.words import split_name
from stackroute.server.routing.arguments.candidate import Candidate
from stackroute.server.routing.arguments.countries import capitals_length

_REGION_WORDS = frozenset(("state", "province", "territory"))
_COUNTRIES = ("US", "CA")


def wants_region(name: str, schema: Mapping[str, Any]) -> bool:
    """Whether property `name` holds a state's or a province's two-letter code."""
    said = set(split_name(name)) | set(split_name(str(schema.get("description", ""))))
    if not said & _REGION_WORDS:
        return False
    enum = schema.get("enum")
    if isinstance(enum, list):
        return bool(enum) and all(isinstance(v, str) and len(v) == 2 and v.isupper()
                                  for v in enum)
    return capitals_length(schema) == 2


def region_candidates(name: str, schema: Mapping[str, Any], text: str, *,
                      prior: float) -> list[Candidate]:
    """The states and provinces `text` names, as codes at `prior`, where property `name`
    wants one (`wants_region`).

    >>> [c.value for c in region_candidates("state", {"pattern": "^[A-Z]{2}$"},
    ...                                     "from Texas to New York", prior=3.0)]
    ['TX', 'NY']
    """
    if not wants_region(name, schema):
        return []
    codes, pattern = _table()
    out = []
    for match in pattern.finditer(text):
        if re.search(r"[A-Z][\w.]*\s+$", text[:match.start()]) and match[0][0].isupper():
            continue  # "George Washington": a longer name
        code = codes[match[0].lower()]
        out.append(Candidate(code, code, "region", prior, match.span()))
    return out


def codes_of(country: str) -> frozenset[str]:
    """The two-letter codes of `country`'s ("US", "CA") states, provinces and territories.

    >>> {"TX", "DC"} <= codes_of("US") and "ON" not in codes_of("US")
    True
    """
    return frozenset(_names(country).values())


@functools.cache
def _names(country: str) -> dict[str, str]:
    return {s.name.lower(): s.code.split("-")[1]
            for s in pycountry.subdivisions.get(country_code=country)}


@functools.cache
def _table() -> tuple[dict[str, str], re.Pattern[str]]:
    codes = {name: code for country in _COUNTRIES for name, code in _names(country).items()}
    alternation = "|".join(re.escape(n) for n in sorted(codes, key=len, reverse=True))
    return codes, re.compile(rf"(?<![\w.-])(?:{alternation})(?![\w-])", re.IGNORECASE)
