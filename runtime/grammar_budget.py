"""A size budget for constraints before they are compiled to grammars.

Grammar compilers expand bounded repeats into states: a `{m,n}` repeat costs about n states,
nested repeats multiply, a `maxLength` is a repeat of one character, and each level of
`oneOf`/`anyOf`/`allOf` nesting multiplies the alternatives. A client's schema (or a
catalog's) past these bounds could stall a worker while it compiles, so it is refused first,
with the construct named. The bounds are far above what tool arguments need.

>>> regex_budget_problem("[a-z]{1,64}") is None
True
"""

from __future__ import annotations

import re

# The parsed form of a pattern: there is no public parser (sre_parse is a deprecated alias).
import re._constants as sre  # type: ignore[import-not-found]
import re._parser as sre_parser  # type: ignore[import-not-found]
from collections.abc import Mapping
from typing import Any

MAX_COMBINATOR_DEPTH = 12  # oneOf/anyOf/allOf inside one another
MAX_REPEAT_STATES = 10_000  # a regex's repeat bounds, nested ones multiplied
MAX_LENGTH_BOUND = 100_000  # minLength/maxLength/minItems/maxItems/…
MAX_SCHEMA_NODES = 20_000  # subschemas in one schema
_COMBINATORS = ("oneOf", "anyOf", "allOf")
_LENGTH_KEYS = ("minLength", "maxLength", "minItems", "maxItems", "minProperties",
                "maxProperties", "minContains", "maxContains")


def schema_budget_problem(schema: Any) -> str | None:
    """Which construct of `schema` is past the budget, or None (iterative: no recursion)."""
    stack: list[tuple[Any, str, int]] = [(schema, "", 0)]
    num_nodes = 0
    while stack:
        node, at, depth = stack.pop()
        if isinstance(node, list):
            stack.extend((item, f"{at}/{i}", depth) for i, item in enumerate(node))
            continue
        if not isinstance(node, Mapping):
            continue
        num_nodes += 1
        if num_nodes > MAX_SCHEMA_NODES:
            return f"the schema has more than {MAX_SCHEMA_NODES} subschemas"
        where = at.lstrip("/") or "(top)"
        for key in _LENGTH_KEYS:
            value = node.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and \
                    value > MAX_LENGTH_BOUND:
                return f"{key} {value} at {where} is above the limit of {MAX_LENGTH_BOUND}"
        pattern = node.get("pattern")
        if isinstance(pattern, str):
            problem = regex_budget_problem(pattern)
            if problem is not None:
                return f"pattern at {where}: {problem}"
        for key, value in node.items():
            if not isinstance(value, Mapping | list) or key in ("enum", "const", "examples",
                                                                 "default"):
                continue
            inner = depth + 1 if key in _COMBINATORS else depth
            if inner > MAX_COMBINATOR_DEPTH:
                return (f"oneOf/anyOf/allOf nested more than {MAX_COMBINATOR_DEPTH} deep at "
                        f"{where}/{key}")
            stack.append((value, f"{at}/{key}", inner))
    return None


def regex_budget_problem(pattern: str) -> str | None:
    """Why `pattern`'s repeats would compile to too many states, or None."""
    try:
        parsed = sre_parser.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return None  # the regex's own check reports it
    states = _repeat_states(list(parsed))
    if states > MAX_REPEAT_STATES:
        return (f"its repeats expand to about {states} states, more than the limit of "
                f"{MAX_REPEAT_STATES} (a {{m,n}} repeat costs n; nested repeats multiply)")
    return None


def _repeat_states(items: list[Any]) -> int:
    """About how many states the bounded repeats in `items` expand to (unbounded repeats are
    loops: they cost their body once)."""
    total = 0
    for op, av in items:
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
            low, high, body = av
            count = max(low, 1) if high == sre.MAXREPEAT else high
            total += count * max(_repeat_states(list(body)), 1)
        elif op in (sre.SUBPATTERN,):
            total += _repeat_states(list(av[3]))
        elif op == sre.BRANCH:
            total += sum(_repeat_states(list(b)) for b in av[1])
        elif op in (sre.ASSERT, sre.ASSERT_NOT, sre.ATOMIC_GROUP):
            total += _repeat_states(list(av[1] if op != sre.ATOMIC_GROUP else av))
        else:
            total += 1
        if total > MAX_REPEAT_STATES:
            return total
    return total
