"""A bound on the size of JSON-schema arrays and free-form objects, so constrained generation
always ends.

An `array` without `maxItems` is any count of items, and an `object` that allows properties
it does not list (`{"type": "object"}`, `additionalProperties: true` or a schema) is any count
of keys: a small model that loops inside one writes items until the token cap, the answer is
cut off and the call fails its format (the failure constraints exist to prevent). Worse, a
free-form value compiles (xgrammar 0.2.8, strict mode, measured) to xgrammar's own "any JSON"
rule, whose strings, numbers and nesting have no bound at all, so the string and number caps
(`string_caps.py`, `number_caps.py`) cannot reach inside it.

`cap_container_sizes` returns a copy in which
- every array gets `maxItems` (MAX_ITEMS, or the author's `minItems` or `prefixItems` count
  where that is larger), and an array that says nothing of its items gets scalar items;
- every object that allows unlisted properties gets `maxProperties` (its listed properties
  plus MAX_ITEMS), its unlisted values become scalars where the author left them open, and,
  where it lists none, its names plain strings (which the string cap then bounds; beside
  listed properties `propertyNames` is one of the combinations xgrammar does not support,
  and vLLM refuses such a schema).

A scalar here is a string, a number, a boolean or null: a nested value needs a schema that
says so. Two traps this avoids, both measured on xgrammar 0.2.8: `maxItems` on an array
without `items` (and `maxProperties` on an object without `additionalProperties`) compile to
"only empty" in strict mode, so the items and values are always given with the bound. An
author's `maxItems` / `maxProperties` always wins; the caller's schema is never changed and
the answer is validated against it, not against the copy.

MAX_ITEMS (16) is sized for what one request can hand a tool: 16 values of a capped string are
already most of the arguments' token budget (384 tokens by default). A catalog whose tool takes
more gives its schema a `maxItems` of its own.

>>> cap_container_sizes({"type": "array", "items": {"type": "string"}})
{'type': 'array', 'items': {'type': 'string'}, 'maxItems': 16}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stackroute.grammars.schema_walk import kinds_of, rewritten

MAX_ITEMS = 16


def scalar_schema() -> dict[str, Any]:
    """What an item or a value the author left open may be (a fresh copy each time: the later
    caps rewrite it in place)."""
    return {"anyOf": [{"type": "string"}, {"type": "number"}, {"type": "boolean"},
                      {"type": "null"}]}


def cap_container_sizes(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of `schema` with every array and every open object bounded."""
    return rewritten(schema, _cap)


def _cap(node: dict[str, Any]) -> None:
    kinds = kinds_of(node)
    if "enum" in node or "const" in node:
        return
    if "array" in kinds:
        _cap_array(node)
    if "object" in kinds:
        _cap_object(node)


def _is_open(subschema: Any) -> bool:
    """True for a subschema that allows any JSON value: absent, `true` or `{}`."""
    return subschema is None or subschema is True or subschema == {}


def _cap_array(node: dict[str, Any]) -> None:
    if node.get("items") is False:
        return  # only the prefixItems: already bounded
    if _is_open(node.get("items")):
        node["items"] = scalar_schema()
    if "maxItems" not in node:
        node["maxItems"] = max(MAX_ITEMS, _count(node.get("minItems")),
                               len(node.get("prefixItems") or ()))


def _cap_object(node: dict[str, Any]) -> None:
    extra = node.get("additionalProperties")
    closed = extra is False or (extra is None and "properties" in node)
    if closed and "patternProperties" not in node:
        return  # strict mode: only the listed properties, already bounded
    if not closed:
        if _is_open(extra):
            node["additionalProperties"] = scalar_schema()
        if _is_open(node.get("propertyNames")) and not (
                "properties" in node or "patternProperties" in node):
            node["propertyNames"] = {"type": "string"}  # not beside them: xgrammar issue 958
    if "maxProperties" not in node:
        node["maxProperties"] = max(len(node.get("properties") or ()) + MAX_ITEMS,
                                    _count(node.get("minProperties")))


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
