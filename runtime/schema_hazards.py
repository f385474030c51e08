"""Schema hazards: valid JSON Schema that a hostile catalog could still turn against the server.

A leaf's parameters are applied to every argument the model writes, so a catalog must not be
able to make that step fetch, loop or stall:

- a `$ref` that is not local (`"#…"`): `jsonschema` resolves remote references by default, so
  a catalog could make the server GET any URL it names (argument validation also runs with an
  empty registry now, so nothing is ever fetched; refusing it at load says so early);
- a local `$ref` that points nowhere;
- a cycle of references through keywords that apply in place (`$ref`, `allOf`, `anyOf`,
  `oneOf`, `not`, `if`/`then`/`else`, `dependentSchemas`) that never reaches a value: validation
  would recurse until the stack runs out (recursion through `properties` or `items` is fine:
  each step consumes part of the instance);
- a `pattern` (or `patternProperties` key) that repeats a variable-length part or
  alternatives that can match the same text (`(a+)+`, `(a|a)*`, `(a{1,9}){1,9}`): Python's
  `re` backtracks exponentially on a near miss (`^(a+)+$` against 30 `a`s and a `!` took
  109 s, `^(a|a)*$` 1.47 s on 25 characters). Repeats are refused once the ways to match one
  text pass `MAX_MATCH_WAYS`; possessive quantifiers (`a++`) and atomic groups (`(?>…)`) are
  accepted: they cannot backtrack.

>>> schema_hazard({"type": "object", "properties": {"x": {"$ref": "http://10.0.0.1/x.json"}}})
"$ref 'http://10.0.0.1/x.json' at properties/x is not local: only '#…' references are allowed"
>>> schema_hazard({"type": "string", "pattern": "^\\\\d+$"}) is None
True
"""

from __future__ import annotations

import math
import re

# The parsed form of a pattern: there is no public parser (sre_parse is a deprecated alias).
import re._constants as sre  # type: ignore[import-not-found]
import re._parser as sre_parser  # type: ignore[import-not-found]
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import unquote

_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_ONE = ("items", "additionalProperties", "not", "if", "then", "else", "contains",
               "propertyNames", "unevaluatedItems", "unevaluatedProperties", "additionalItems")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
# Keywords whose subschemas apply to the same instance (no part of it is consumed).
_IN_PLACE = frozenset({"allOf", "anyOf", "oneOf", "not", "if", "then", "else",
                       "dependentSchemas"})
_REFS = ("$ref", "$dynamicRef")


def schema_hazard(schema: Mapping[str, Any]) -> str | None:
    """Why applying this (valid) schema to arguments is unsafe, or None."""
    anchors: dict[str, str] = {}
    refs: list[tuple[str, str]] = []  # (pointer of the schema holding it, reference)
    has_inner_id = False
    for node, pointer in _subschemas(schema):
        if pointer and isinstance(node.get("$id"), str):
            has_inner_id = True
        for key in ("$anchor", "$dynamicAnchor"):
            if isinstance(node.get(key), str):
                anchors[node[key]] = pointer
        for key in _REFS:
            ref = node.get(key)
            if isinstance(ref, str):
                if not ref.startswith("#"):
                    return (f"{key} {ref!r} at {_where(pointer)} is not local: only '#…' "
                            "references are allowed")
                refs.append((pointer, ref))
        problem = _pattern_problem(node, pointer)
        if problem is not None:
            return problem
    edges: dict[str, list[str]] = {}
    for pointer, ref in refs:
        target = _resolve(schema, ref, anchors)
        if target is None:
            if has_inner_id:  # resolved against an inner $id: we cannot tell, let it be
                continue
            return f"$ref {ref!r} at {_where(pointer)} points nowhere in the schema"
        edges.setdefault(pointer, []).append(target)
    return _cycle_problem(schema, edges)


def _subschemas(schema: Any, pointer: str = "") -> Iterator[tuple[Mapping[str, Any], str]]:
    """Every subschema with its JSON pointer, the root first (iterative: no recursion limit)."""
    stack: list[tuple[Any, str]] = [(schema, pointer)]
    while stack:
        node, at = stack.pop()
        if not isinstance(node, Mapping):
            continue
        yield node, at
        stack.extend((child, child_at) for _, child, child_at in _children(node, at))


def _children(node: Mapping[str, Any], at: str) -> Iterator[tuple[str, Any, str]]:
    """(keyword, subschema, its pointer) for each subschema directly under `node`."""
    for key in _SCHEMA_MAPS:
        value = node.get(key)
        if isinstance(value, Mapping):
            for name, child in value.items():
                yield key, child, f"{at}/{_escape(key)}/{_escape(str(name))}"
    for key in _SCHEMA_ONE:
        value = node.get(key)
        if isinstance(value, Mapping):
            yield key, value, f"{at}/{_escape(key)}"
    for key in _SCHEMA_LISTS:
        value = node.get(key)
        if isinstance(value, list):
            for i, child in enumerate(value):
                yield key, child, f"{at}/{_escape(key)}/{i}"


def _resolve(schema: Mapping[str, Any], ref: str, anchors: Mapping[str, str]) -> str | None:
    """The JSON pointer a local reference names, if it names a schema."""
    fragment = unquote(ref[1:])
    if fragment and not fragment.startswith("/"):
        return anchors.get(fragment)
    node: Any = schema
    for part in fragment.split("/")[1:]:
        key = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return None
    if not isinstance(node, Mapping | bool):
        return None
    return "".join(f"/{_escape(p.replace('~1', '/').replace('~0', '~'))}"
                   for p in fragment.split("/")[1:])


def _cycle_problem(schema: Mapping[str, Any], ref_edges: Mapping[str, list[str]]) -> str | None:
    """A cycle of in-place applications (references included), as a message, or None."""
    by_pointer = {pointer: node for node, pointer in _subschemas(schema)}
    # Nodes only reachable by reference (e.g. under an unknown keyword) get walked too.
    for targets in ref_edges.values():
        for target in targets:
            if target not in by_pointer:
                node = node_at(schema, target)
                if isinstance(node, Mapping):
                    for child, pointer in _subschemas(node, target):
                        by_pointer.setdefault(pointer, child)

    def next_of(pointer: str) -> list[str]:
        node = by_pointer.get(pointer)
        out = list(ref_edges.get(pointer, ()))
        if node is not None:
            out += [p for key, _, p in _children(node, pointer) if key in _IN_PLACE]
        return out

    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in by_pointer:
        if start in state:
            continue
        path = [start]
        iterators = [iter(next_of(start))]
        state[start] = 1
        while iterators:
            step = next(iterators[-1], None)
            if step is None:
                state[path.pop()] = 2
                iterators.pop()
                continue
            if state.get(step) == 1:
                cycle = [*path[path.index(step):], step]
                return ("$ref cycle never reaches a value (validation would not end): "
                        + " -> ".join(_where(p) for p in cycle))
            if step not in state:
                state[step] = 1
                path.append(step)
                iterators.append(iter(next_of(step)))
    return None


def node_at(schema: Mapping[str, Any], pointer: str) -> Any:
    """What the JSON pointer `pointer` ("/$defs/Base", "" for the whole) names in `schema`,
    or None where it names nothing."""
    node: Any = schema
    for part in pointer.split("/")[1:]:
        key = part.replace("~1", "/").replace("~0", "~")
        node = node.get(key) if isinstance(node, Mapping) else (
            node[int(key)] if isinstance(node, list) and key.isdigit() and int(key) < len(node)
            else None)
    return node


def _pattern_problem(node: Mapping[str, Any], pointer: str) -> str | None:
    patterns = []
    if isinstance(node.get("pattern"), str):
        patterns.append(node["pattern"])
    if isinstance(node.get("patternProperties"), Mapping):
        patterns.extend(str(k) for k in node["patternProperties"])
    for pattern in patterns:
        try:
            parsed = sre_parser.parse(pattern)
        except (re.error, RecursionError, OverflowError):
            continue  # the metaschema's regex check reports it
        if _is_backtracking_trap(list(parsed)):
            return (f"pattern {pattern!r} at {_where(pointer)} repeats a variable-length "
                    "part or overlapping alternatives, where re backtracks exponentially; "
                    "use a possessive quantifier (a++), an atomic group (?>…), "
                    "alternatives that start differently, or a smaller repeat count")
    return None


def _is_backtracking_trap(items: list[Any], *, num_outer: float = 1) -> bool:
    """Whether the parsed pattern can backtrack without bound. `num_outer` is how many times
    the enclosing repeats can run the items (their max counts multiplied; inf: unbounded).
    Inside repeats, two things multiply the ways to match one text: a variable repeat (each
    run can take a different length: `(a{1,9}){1,9}`, `(a+)+`) and an alternation whose
    branches can match the same text (`(a|a)*`, `(.|x)*`). Each is refused once the ways
    reach `MAX_MATCH_WAYS`; possessive repeats and atomic groups cannot backtrack."""
    for op, av in items:
        bodies: list[Any] = []  # the parts of this item that can backtrack
        inner_outer = num_outer
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
            low, high, body = av
            count = math.inf if high == sre.MAXREPEAT else high
            if low != high and _too_many_ways(count - low + 1, num_outer):
                return True
            bodies, inner_outer = [body], num_outer * max(count, 1)
        elif op == sre.SUBPATTERN:
            bodies = [av[3]]
        elif op == sre.BRANCH:
            branches = list(av[1])
            if _branches_overlap(branches) and _too_many_ways(len(branches), num_outer):
                return True
            bodies = branches
        elif op in (sre.ASSERT, sre.ASSERT_NOT):
            bodies = [av[1]]
        elif op == sre.GROUPREF_EXISTS:
            bodies = [b for b in av[1:] if b is not None]
        # POSSESSIVE_REPEAT and ATOMIC_GROUP cannot backtrack: nothing to look at inside.
        if any(_is_backtracking_trap(list(b), num_outer=inner_outer) for b in bodies):
            return True
    return False


MAX_MATCH_WAYS = 100_000  # ways to split one text among repeats before a pattern is refused


def _too_many_ways(num_choices: float, num_outer: float) -> bool:
    """`num_choices` per run, over `num_outer` runs: more than MAX_MATCH_WAYS ways?"""
    if num_outer <= 1 or num_choices <= 1:
        return False
    if math.isinf(num_outer) or math.isinf(num_choices):
        return True
    return num_outer * math.log(num_choices) > math.log(MAX_MATCH_WAYS)


_ANY = None  # a first set that may be any character


def _branches_overlap(branches: list[Any]) -> bool:
    """Two alternatives could start the same way: both can match the empty text, or their
    first characters can be the same (by a conservative reading of the parse)."""
    firsts = [_first(list(b)) for b in branches]
    nullable = [f for f in firsts if f[1]]
    if len(nullable) > 1:
        return True
    sets = [f[0] for f in firsts if f[0] != frozenset()]
    for i, first in enumerate(sets):
        for other in sets[i + 1:]:
            if first is _ANY or other is _ANY or first & other:
                return True
    return False


def _first(items: list[Any]) -> tuple[frozenset[int] | None, bool]:
    """(the characters the items can start with, or _ANY; whether they can match empty)."""
    chars: set[int] = set()
    for op, av in items:
        if op == sre.LITERAL:
            return frozenset(chars | {av}), False
        if op == sre.AT:
            continue  # an anchor matches no character
        if op == sre.SUBPATTERN:
            first, nullable = _first(list(av[3]))
        elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
            first, nullable = _first(list(av[2]))
            nullable = nullable or av[0] == 0
        else:  # IN, ANY, CATEGORY, NOT_LITERAL, BRANCH, …: read as "any character"
            return _ANY, False
        if first is _ANY:
            return _ANY, False
        chars |= first
        if not nullable:
            return frozenset(chars), False
    return frozenset(chars), True


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


def _where(pointer: str) -> str:
    return pointer.lstrip("/") or "(top)"
