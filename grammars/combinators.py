"""Combinators xgrammar reads apart from what stands beside them, rewritten for the grammar.

`allOf` of several schemas, or of one beside other keywords: xgrammar compiles neither as JSON
Schema reads it (it took `{}` and refused `{"a":1,"b":"x"}` for `allOf: [{required: [a]},
{required: [b]}]`; beside `properties`, it dropped them), so its schemas are merged into their
parent (required names joined, properties merged, any other keyword the parent leaves out
taken from them), a local `$ref` read where it points; one with a remote `$ref` or a
combinator of its own is left as written.

`anyOf` / `oneOf` beside other keywords: JSON Schema reads them beside `properties`, `required`
and the rest as both at once: `{"properties": {...}, "required": ["name"], "anyOf":
[{"required": ["address"]}, {"required": ["lat", "lon"]}]}` takes an object with a name and an
address or with a name and both coordinates. xgrammar compiles the alternatives alone and drops
what stands beside them, so it took `{"address": {"type": "string"}}` and refused every valid
call (a held-out fleet desk's geofence: six refused calls, then the step limit). Each
alternative is given its parent's keywords instead (required names joined, properties the
parent's where the alternative gives none), and the grammar takes what the schema takes.
`oneOf` becomes `anyOf` for the grammar (it cannot count matches); answers are validated
against the caller's schema, which still refuses an object that meets two.

>>> schema = {"type": "object", "properties": {"a": {"type": "string"}},
...           "required": ["a"], "anyOf": [{"required": ["b"]}, {"required": ["c"]}]}
>>> [branch["required"] for branch in distributed(schema)["anyOf"]]
[['a', 'b'], ['a', 'c']]
>>> distributed({"type": "object", "allOf": [{"required": ["a"]}, {"required": ["b"]}]})
{'type': 'object', 'required': ['a', 'b']}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stackroute.grammars.schema_walk import rewritten
from stackroute.runtime.schema_hazards import node_at

# what a parent keeps for itself, not given to its alternatives
_OWN_KEYS = frozenset(("anyOf", "oneOf", "$defs", "definitions", "$schema", "$id", "title",
                       "description", "examples", "default", "$comment"))


def distributed(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `schema` where every `allOf` is merged into its parent where xgrammar would
    read it apart (several schemas, or one beside other keywords; a local `$ref` among them
    read where it points) and every `anyOf` / `oneOf` beside other keywords carries them into
    each alternative."""
    root = dict(schema)

    def rewrite(node: dict[str, Any]) -> None:
        _merge_all_of(node, root)
        _distribute(node)

    return rewritten(schema, rewrite)


def _merge_all_of(node: dict[str, Any], root: Mapping[str, Any]) -> None:
    parts = node.get("allOf")
    if not isinstance(parts, list):
        return
    beside = [k for k in node if k not in _OWN_KEYS and k != "allOf"]
    if len(parts) < 2 and not beside:
        return  # one schema alone (a `$ref` with a description beside it): xgrammar reads it
    parts = [_local(p, root) for p in parts]
    kept = [p for p in parts if not isinstance(p, Mapping) or "$ref" in p
            or any(k in p for k in ("allOf", "anyOf", "oneOf"))]
    merged = {k: v for k, v in node.items() if k != "allOf"}
    for part in parts:
        if not any(part is k for k in kept):
            merged = _joined(merged, part)
    node.clear()
    node.update(merged)
    if kept:
        node["allOf"] = kept


def _local(part: Any, root: Mapping[str, Any]) -> Any:
    """`part`, or the schema its local `$ref` points to ("#/$defs/Base") where it is nothing
    else."""
    if not isinstance(part, Mapping) or set(part) != {"$ref"} \
            or not str(part["$ref"]).startswith("#/"):
        return part
    target = node_at(root, str(part["$ref"])[1:])
    return dict(target) if isinstance(target, Mapping) else part


def _distribute(node: dict[str, Any]) -> None:
    key = "anyOf" if isinstance(node.get("anyOf"), list) else \
        "oneOf" if isinstance(node.get("oneOf"), list) else None
    if key is None or (key == "anyOf" and isinstance(node.get("oneOf"), list)):
        return  # none, or both: left as written
    shared = {k: v for k, v in node.items() if k not in _OWN_KEYS}
    if not shared:
        return
    branches = [_joined(shared, b) for b in node[key] if isinstance(b, Mapping)]
    for k in shared:
        del node[k]
    del node[key]
    node["anyOf"] = branches


def _joined(shared: Mapping[str, Any], branch: Mapping[str, Any]) -> dict[str, Any]:
    """`branch` with the parent's `shared` keywords: `required` names joined, `properties`
    merged (the branch's own schema of a property first), any other keyword the branch leaves
    out taken from the parent."""
    out = {**shared, **branch}
    required = [*shared.get("required", ()), *branch.get("required", ())]
    if required:
        out["required"] = list(dict.fromkeys(required))
    properties = {**shared.get("properties", {}), **branch.get("properties", {})}
    if properties:
        out["properties"] = properties
    return out
