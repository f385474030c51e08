"""Every subschema of a JSON schema, for the rewrites that bound what generation may write
(`container_caps.py`, `string_caps.py`, `number_caps.py`)."""

from __future__ import annotations

from collections.abc import Callable
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
