"""Values a leaf call needs that its request did not hold: asked of the user, not invented.

With the router's `ask` option (server/routing/options.py, `MissingValues`), a required value
the request holds no candidate for is left out of the call and named in
`Decision.missing_values`; the machine checks the rest of the call against the leaf's schema
without those names required (`partial_schema`) and pauses it (`PendingCall.missing_values`).
`StackMachine.supply` takes the user's values, checked here (`supplied_arguments`) before
anything changes, so a wrong answer loses nothing: the call still waits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stackroute.runtime.errors import InputError
from stackroute.runtime.schemas import argument_errors


def partial_schema(schema: Mapping[str, Any] | None,
                   missing: tuple[str, ...]) -> Mapping[str, Any] | None:
    """`schema` with the `missing` names no longer required (what a call waiting for them
    must already satisfy).

    >>> partial_schema({"type": "object", "required": ["payee", "amount"]}, ("amount",))
    {'type': 'object', 'required': ['payee']}
    """
    if schema is None or not missing:
        return schema
    required = [name for name in schema.get("required") or () if name not in missing]
    return {**schema, "required": required}


def unknown_missing(schema: Mapping[str, Any] | None, missing: tuple[str, ...]) -> list[str]:
    """The `missing` names that are not required properties of `schema` (a router's bug:
    only a required value can be asked for).

    >>> unknown_missing({"properties": {"a": {}}, "required": ["a"]}, ("a", "b"))
    ['b']
    """
    properties = (schema or {}).get("properties") or {}
    required = set((schema or {}).get("required") or ())
    return [name for name in missing if name not in properties or name not in required]


def supplied_arguments(schema: Mapping[str, Any] | None, arguments: Mapping[str, Any],
                       missing: tuple[str, ...], values: Any, *, leaf: str) -> dict[str, Any]:
    """The call's arguments with the user's `values` for its `missing` ones, in the schema's
    property order; InputError (nothing changed) when `values` is not a JSON object naming
    exactly the missing values, or the whole call then fails the leaf's schema."""
    expected = ", ".join(missing)
    if not isinstance(values, Mapping):
        raise InputError(f"values for {leaf} must be a JSON object with {expected}; got "
                         f"{type(values).__name__}")
    absent = [name for name in missing if name not in values]
    extra = [name for name in values if name not in missing]
    if extra:
        raise InputError(f"{leaf} waits only for {expected}; got {', '.join(map(str, extra))} "
                         "too (a value taken from the request is changed by rejecting the "
                         "call and asking again)")
    if absent:
        raise InputError(f"{leaf} still needs {', '.join(absent)}: give every missing value "
                         f"({expected}) in one answer")
    merged = {**arguments, **values}
    order = list((schema or {}).get("properties") or {})
    merged = {name: merged[name] for name in order if name in merged} | {
        name: value for name, value in merged.items() if name not in order}
    errors = argument_errors(schema, merged)
    if errors:
        raise InputError(f"values for {leaf} do not fit its schema: " + "; ".join(errors))
    return merged


def values_schema(schema: Mapping[str, Any] | None, missing: tuple[str, ...]) -> dict[str, Any]:
    """The JSON schema of an answer to a call waiting for `missing`: an object with exactly
    those properties (their schemas as the leaf has them), all required. What a client
    shows as a form, and MCP elicitation asks for.

    >>> asked = values_schema({"properties": {"payee": {"type": "string"},
    ...                                       "amount": {"type": "number"}}}, ("amount",))
    >>> asked["properties"], asked["required"], asked["additionalProperties"]
    ({'amount': {'type': 'number'}}, ['amount'], False)
    """
    properties = (schema or {}).get("properties") or {}
    return {"type": "object", "properties": {name: properties.get(name, {}) for name in missing},
            "required": list(missing), "additionalProperties": False}
