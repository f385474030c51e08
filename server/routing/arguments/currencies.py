"""Currency codes a request writes, for a property that wants one.

A property wants an ISO 4217 code where its name or description speaks of a currency and its
schema takes three capital letters (`^[A-Z]{3}$`, a length of 3), its description names ISO
4217 or gives codes as its examples ("e.g., USD, EUR"), or its enum holds only codes. A code
the request writes ("pay band 140k-165k CAD") is then a value only this kind of property takes,
and so a sign or a word that names one currency ("€15", "20 euros", "£250"). "$" and "dollars"
are the US dollar's unless a country qualifies them ("C$", "AU$", "Canadian dollars"), as a
price written without one is read; a dollar of a country not listed here names no code (never a
wrong one), and "pounds" alone may be a weight. Codes come from `pycountry`'s list.
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
from stackroute.server.routing.arguments.money import DOLLAR, MONEY_WORD, money_word

_CODE = re.compile(r"(?<![\w-])[A-Z]{3}(?![\w-])")
_SIGN = re.compile(r"(?<![\w$])(?P<country>[A-Z]{1,2})?(?P<sign>[$€£₹])\s?\d")
_SIGNS = {"€": "EUR", "£": "GBP", "₹": "INR"}
# who a dollar is, by the letters before its sign or the words before its name
_DOLLAR_SIGNS = {None: "USD", "US": "USD", "C": "CAD", "CA": "CAD", "A": "AUD", "AU": "AUD",
                 "NZ": "NZD", "HK": "HKD", "S": "SGD", "SG": "SGD"}
_DOLLAR_COUNTRIES = {"us": "USD", "u.s.": "USD", "american": "USD", "canadian": "CAD",
                     "australian": "AUD", "aussie": "AUD", "zealand": "NZD", "kong": "HKD",
                     "singapore": "SGD", "singaporean": "SGD"}


def wants_code(name: str, schema: Mapping[str, Any]) -> bool:
    """Whether property `name` holds an ISO 4217 currency code."""
    described = str(schema.get("description", ""))
    if "currency" not in split_name(name) + split_name(described):
        return False
    enum = schema.get("enum")
    if isinstance(enum, list):
        return bool(enum) and all(isinstance(v, str) and v in _codes() for v in enum)
    examples = _CODE.findall(described)  # "(e.g., USD, EUR)"
    return capitals_length(schema) == 3 or "4217" in described \
        or (bool(examples) and all(code in _codes() for code in examples))


def currency_candidates(name: str, schema: Mapping[str, Any], text: str, *,
                        prior: float) -> list[Candidate]:
    """The ISO 4217 codes `text` writes, or names by a sign or a word, at `prior`, where
    property `name` wants one.

    >>> schema = {"type": "string", "pattern": "^[A-Z]{3}$"}
    >>> [c.text for c in currency_candidates("currency", schema, "140k-165k CAD, not THE USD",
    ...                                      prior=3.0)]
    ['CAD', 'USD']
    """
    if not wants_code(name, schema):
        return []
    found = [(m[0], m.span()) for m in _CODE.finditer(text) if m[0] in _codes()]
    for m in _SIGN.finditer(text):
        sign = m["sign"]
        code = _DOLLAR_SIGNS.get(m["country"]) if sign == "$" else \
            _SIGNS[sign] if m["country"] is None else None
        if code is not None:
            found.append((code, m.span("sign")))
    for m in MONEY_WORD.finditer(text):
        code = money_word(m[0])
        if code == DOLLAR:
            code = _dollar(text[:m.start()])
        if code is not None and m.span() not in [span for _, span in found]:
            found.append((code, m.span()))
    return [Candidate(code, code, "currency", prior, span)
            for code, span in sorted(found, key=lambda f: f[1])]


def _dollar(before: str) -> str | None:
    """Whose dollar the words before "dollars" say: the US's where they name no country
    ("40 dollars"), the country's they name ("Canadian dollars"), none where a capitalised
    word of a country not listed stands there ("Jamaican dollars")."""
    words = before.split()
    last = words[-1] if words else ""
    if last.lower() in _DOLLAR_COUNTRIES:
        return _DOLLAR_COUNTRIES[last.lower()]
    return None if last[:1].isupper() and last.isalpha() else "USD"


@functools.cache
def _codes() -> frozenset[str]:
    return frozenset(c.alpha_3 for c in pycountry.currencies)
