"""Every subschema of a JSON schema, for the rewrites that bound what generation may write
(`container_caps.py`, `string_caps.py`, `number_caps.py`)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

_SUBSCHEMA_KEYS = ("items", "additionalProperties", "not", "if", "then", "else",
                   "contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties")
_SUBSCHEMA_LIST_KEYS = ("prefixItems", "anyOf", "oneOf", "allOf")
_SUBSCHEMA_MAP_KEYS = ("properties", "patternProperties", "$defs", "definitions")


def walk_schema(node: Any, visit: Callable[[dict[str, Any]], None]) -> None:
    """`visit` each schema object in `node`, the node itself first (it may rewrite in place)."""
    if not isinstance(node, dict):
        return
    visit(node)
    for key in _SUBSCHEMA_KEYS:
        walk_schema(node.get(key), visit)
    for key in _SUBSCHEMA_LIST_KEYS:
        for child in node.get(key) or ():
            walk_schema(child, visit)
    for key in _SUBSCHEMA_MAP_KEYS:
        children = node.get(key)
        if isinstance(children, dict):
            for child in children.values():
                walk_schema(child, visit)


def rewritten(schema: Mapping[str, Any], visit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """A deep copy of `schema` with `visit` applied to each of its schema objects (the
    caller's schema is never changed)."""
    copied: dict[str, Any] = copy.deepcopy(dict(schema))
    walk_schema(copied, visit)
    return copied


def kinds_of(node: Mapping[str, Any]) -> set[Any]:
    """The node's `type` as a set (a list of types, one type, or {None} where it names none)."""
    kind = node.get("type")
    return set(kind) if isinstance(kind, list) else {kind}
