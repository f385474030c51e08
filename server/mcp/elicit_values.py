"""Asking an MCP client's user for the values a routed call waits for (`PendingCall.
missing_values`), through MCP elicitation.

An elicitation's `requestedSchema` is a flat object of primitive properties only (string,
number, integer, boolean, or a string enum; each with a few keys the spec names). A call's
`values_schema` (runtime/missing_values.py) becomes one when every missing property is such a
primitive (`requested_schema`); otherwise the client is not asked, and its model answers with
the `supply_values` tool from the paused answer's message. Keys a form cannot carry (a string
`pattern`, `exclusiveMinimum`) are left out of the form; the leaf's own schema still checks
the answer when it is supplied, so a value they forbid is refused with the schema's words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stackroute.server.service.values_question import described_call, described_value

STRING_FORMATS = frozenset({"date", "date-time", "email", "uri"})
COMMON_KEYS = ("title", "description")
KEYS_BY_TYPE: dict[str, tuple[str, ...]] = {
    "string": (*COMMON_KEYS, "minLength", "maxLength"),
    "number": (*COMMON_KEYS, "minimum", "maximum"),
    "integer": (*COMMON_KEYS, "minimum", "maximum"),
    "boolean": COMMON_KEYS,
}
DEFAULT_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "number": (int, float), "integer": (int,), "boolean": (bool,)}


def requested_schema(values_schema: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The elicitation form for `values_schema`, or None when some property is not a
    primitive a form can hold (an object, an array, a union, a schema with no type).

    >>> form = requested_schema({"type": "object", "required": ["amount"], "properties": {
    ...     "amount": {"type": "number", "description": "in dollars", "exclusiveMinimum": 0}}})
    >>> form["properties"], form["required"]
    ({'amount': {'type': 'number', 'description': 'in dollars'}}, ['amount'])
    >>> requested_schema({"type": "object", "properties": {"to": {"type": "array"}}}) is None
    True
    """
    if values_schema is None:
        return None
    properties: dict[str, Any] = {}
    for name, schema in (values_schema.get("properties") or {}).items():
        form = primitive_property(schema)
        if form is None:
            return None
        properties[name] = form
    if not properties:
        return None
    return {"type": "object", "properties": properties,
            "required": [n for n in values_schema.get("required") or () if n in properties]}


def primitive_property(schema: Any) -> dict[str, Any] | None:
    """`schema` as an elicitation property (the keys its type allows), or None when it is not
    a primitive: its type is none of string/number/integer/boolean (or a list of types), or
    it has an enum that is not all strings.

    >>> primitive_property({"type": "string", "enum": ["debit", "credit"], "title": "Card"})
    {'type': 'string', 'enum': ['debit', 'credit'], 'title': 'Card'}
    >>> primitive_property({"enum": [1, 2]}) is None
    True
    """
    if not isinstance(schema, Mapping):
        return None
    kind = schema.get("type", "string" if "enum" in schema else None)
    if not isinstance(kind, str) or kind not in KEYS_BY_TYPE:
        return None
    if any(key in schema for key in ("anyOf", "oneOf", "allOf", "$ref", "const")):
        return None
    out: dict[str, Any] = {"type": kind}
    if "enum" in schema:
        enum = schema["enum"]
        if kind != "string" or not isinstance(enum, list) or not enum or \
                not all(isinstance(v, str) for v in enum):
            return None
        out["enum"] = list(enum)
        keys: tuple[str, ...] = COMMON_KEYS
    else:
        keys = KEYS_BY_TYPE[kind]
    out.update({key: schema[key] for key in keys if key in schema})
    if kind == "string" and "enum" not in out and schema.get("format") in STRING_FORMATS:
        out["format"] = schema["format"]
    default = schema.get("default")
    if isinstance(default, DEFAULT_TYPES[kind]) and (kind == "boolean"
                                                     or not isinstance(default, bool)):
        out["default"] = default
    return out


def values_message(pending: Mapping[str, Any]) -> str:
    """What the user reads above the form: the call and the values it still needs.

    >>> print(values_message({"path": "send_money", "arguments": {"payee": "Asha"},
    ...     "missing_values": ["amount"],
    ...     "values_schema": {"properties": {"amount": {"type": "number",
    ...                                                 "description": "in dollars"}}}}))
    send_money (payee: "Asha") needs what the request did not say: amount (number: in dollars).
    """
    asked = (pending.get("values_schema") or {}).get("properties") or {}
    needs = ", ".join(described_value(name, asked.get(name)) for name in pending["missing_values"])
    return (f"{described_call(pending['path'], pending.get('arguments') or {})} needs what the "
            f"request did not say: {needs}.")

