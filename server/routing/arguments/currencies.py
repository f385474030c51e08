"""Currency codes a request writes, for a property that wants one.

A property wants an ISO 4217 code where its name or description speaks of a currency and its
schema takes three capital letters (`^[A-Z]{3}$`, a length of 3) or its description names ISO
4217. A code the request writes ("pay band 140k-165k CAD") is then a value only this kind of
property takes. Codes come from `pycountry`'s list; symbols and names ("$", "dollars") are not
read as codes here: a dollar is not only the US's.
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

_CODE = re.compile(r"(?<![\w-])[A-Z]{3}(?![\w-])")


def wants_code(name: str, schema: Mapping[str, Any]) -> bool:
    """Whether property `name` holds an ISO 4217 currency code (no enum: an enum's words are
    matched as they are)."""
    described = str(schema.get("description", ""))
    if "currency" not in split_name(name) + split_name(described) or "enum" in schema:
        return False
    return capitals_length(schema) == 3 or "4217" in described


def currency_candidates(name: str, schema: Mapping[str, Any], text: str, *,
                        prior: float) -> list[Candidate]:
    """The ISO 4217 codes `text` writes, at `prior`, where property `name` wants one.

    >>> schema = {"type": "string", "pattern": "^[A-Z]{3}$"}
    >>> [c.text for c in currency_candidates("currency", schema, "140k-165k CAD, not THE USD",
    ...                                      prior=3.0)]
    ['CAD', 'USD']
    """
    if not wants_code(name, schema):
        return []
    return [Candidate(m[0], m[0], "currency", prior, m.span()) for m in _CODE.finditer(text)
            if m[0] in _codes()]


@functools.cache
def _codes() -> frozenset[str]:
    return frozenset(c.alpha_3 for c in pycountry.currencies)
