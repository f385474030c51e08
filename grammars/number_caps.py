"""A bound on the size of JSON-schema numbers, so constrained generation always ends.

A schema `integer` or `number` with no bound is any count of digits: a small model asked for
a value the request does not hold can write digits until the token cap (measured: SmolLM2-135M
wrote `{"age":18,"income":1000…` for all 384 argument tokens; the call was cut off, failed
six times and the run wandered to its step limit). `cap_number_sizes` returns a copy in which
each missing side gets ±MAX_INTEGER (15 digits, inside JSON's exactly-representable integers)
or ±MAX_NUMBER. With a range, xgrammar (0.2.8, measured) also allows at most six fractional
digits and no exponent, so a number is at most 15 + 6 digits. An author's bound always wins;
an `enum` or `const` is bounded already. The caller's schema is never changed, and the answer
is validated against it, not against the copy.

>>> cap_number_sizes({"type": "integer", "minimum": 0})
{'type': 'integer', 'minimum': 0, 'maximum': 999999999999999}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stackroute.grammars.schema_walk import kinds_of, rewritten

MAX_INTEGER = 10 ** 15 - 1
MAX_NUMBER = 10 ** 15


def cap_number_sizes(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of `schema` with both bounds on every integer and number."""
    return rewritten(schema, _cap)


def _cap(node: dict[str, Any]) -> None:
    kinds = kinds_of(node)
    if not kinds & {"integer", "number"} or "enum" in node or "const" in node:
        return
    bound = MAX_NUMBER if "number" in kinds else MAX_INTEGER
    low = node.get("minimum", node.get("exclusiveMinimum"))
    high = node.get("maximum", node.get("exclusiveMaximum"))
    if low is None and (high is None or high > -bound):
        node["minimum"] = -bound
    if high is None and (low is None or low < bound):
        node["maximum"] = bound
