"""Building blocks of the synthetic benchmark catalogs: seeded randomness, argument parameters
and their schema text, the tree assembled from placed leaves and its flat twin (word banks:
`word_banks.py`).

Everything here is deterministic given a `random.Random`; nothing uses `hash()` (randomised per
process) or iterates over a set, so the same seed writes the same bytes on every machine.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypedDict

JsonObject = dict[str, Any]

NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_\-]*")
# Completion states of every menu; runtime/catalog.py rejects them in any letter case.
RESERVED_NAMES = ("DONE", "BACK")

# Leaf parameter schemas: the paper's scale-up used ~800-character schemas. Properties and
# sentences are added greedily up to FILL; every schema must land in [MIN, MAX] (len of
# `json.dumps` with default separators).
SCHEMA_MIN_CHARS = 750
SCHEMA_MAX_CHARS = 850
SCHEMA_FILL_CHARS = 820


class QueryRecord(TypedDict):
    """One line of a `*.queries.jsonl` file (shared/data/FORMAT.md)."""

    id: str
    query: str
    gold: list[str]
    args: list[dict[str, Any]]
    tags: list[str]


def derive_rng(*parts: object) -> random.Random:
    """A generator seeded from the parts' text through SHA-256, stable across processes.

    >>> derive_rng("scale-up", 16, 0).random() == derive_rng("scale-up", 16, 0).random()
    True
    """
    text = "|".join(str(p) for p in parts)
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def is_valid_name(name: str) -> bool:
    """A catalog name: `[A-Za-z][A-Za-z0-9_-]*` and no completion state in any case."""
    return bool(NAME_PATTERN.fullmatch(name)) and name.upper() not in RESERVED_NAMES


# Words that say nothing about a domain; `content_words` drops them.
STOP_WORDS = frozenset((
    "a", "an", "and", "any", "are", "as", "at", "be", "by", "each", "for", "from", "get",
    "in", "into", "is", "it", "its", "of", "on", "one", "or", "so", "that", "the", "their",
    "them", "they", "this", "to", "with", "you", "your",
))


def content_words(text: str) -> list[str]:
    """The lower-case words of `text` that carry meaning (stop words dropped), in order.

    >>> content_words("Pay the bills, or top up your accounts.")
    ['pay', 'bills', 'top', 'up', 'accounts']
    """
    words = re.findall(r"[a-z]+", text.lower())
    return [w for w in words if w not in STOP_WORDS]


# -- parameters ---------------------------------------------------------------------------


class ParamKind(Enum):
    """What a leaf argument holds; decides its schema fragment and how a value is drawn."""

    ID = "id"
    ENUM = "enum"
    DATE = "date"
    MONTH = "month"
    AMOUNT = "amount"
    INTEGER = "integer"
    PERSON = "person"


@dataclass(frozen=True, kw_only=True)
class Param:
    """One argument of a leaf: its JSON-schema fragment and a sampler of valid values."""

    name: str
    kind: ParamKind
    description: str
    values: tuple[str, ...] = ()  # ENUM choices
    prefix: str = ""  # ID: values look like PREFIX-12345
    minimum: int = 1  # INTEGER
    maximum: int = 100  # INTEGER, AMOUNT (major currency units)

    def schema(self) -> JsonObject:
        """The property's JSON Schema (draft 2020-12)."""
        fragment: JsonObject
        if self.kind is ParamKind.ID:
            fragment = {"type": "string", "description": self.description,
                        "pattern": f"^{self.prefix}-[0-9]{{5}}$"}
        elif self.kind is ParamKind.ENUM:
            fragment = {"type": "string", "description": self.description,
                        "enum": list(self.values)}
        elif self.kind is ParamKind.DATE:
            fragment = {"type": "string", "description": self.description, "format": "date"}
        elif self.kind is ParamKind.MONTH:
            fragment = {"type": "string", "description": self.description,
                        "pattern": "^20[0-9]{2}-(0[1-9]|1[0-2])$"}
        elif self.kind is ParamKind.AMOUNT:
            fragment = {"type": "number", "description": self.description,
                        "exclusiveMinimum": 0, "maximum": self.maximum}
        elif self.kind is ParamKind.INTEGER:
            fragment = {"type": "integer", "description": self.description,
                        "minimum": self.minimum, "maximum": self.maximum}
        else:
            fragment = {"type": "string", "description": self.description,
                        "minLength": 2, "maxLength": 80}
        return fragment

    def sample(self, rng: random.Random) -> str | int:
        """A value that validates against `schema()` and reads naturally inside a request."""
        if self.kind is ParamKind.ID:
            return f"{self.prefix}-{rng.randint(10000, 99999)}"
        if self.kind is ParamKind.ENUM:
            return rng.choice(self.values)
        if self.kind is ParamKind.DATE:
            return (dt.date(2026, 1, 1) + dt.timedelta(days=rng.randrange(365))).isoformat()
        if self.kind is ParamKind.MONTH:
            return f"{rng.choice((2025, 2026))}-{rng.randint(1, 12):02d}"
        if self.kind is ParamKind.AMOUNT:
            return 5 * rng.randint(1, self.maximum // 5)  # whole multiples of 5 read cleanly
        if self.kind is ParamKind.INTEGER:
            return rng.randint(self.minimum, self.maximum)
        return rng.choice(PEOPLE)


def sample_args(params: Sequence[Param], rng: random.Random) -> dict[str, Any]:
    """One value per parameter; a `from_date`/`to_date` pair comes out in order."""
    args: dict[str, Any] = {p.name: p.sample(rng) for p in params}
    if "from_date" in args and "to_date" in args and args["from_date"] > args["to_date"]:
        args["from_date"], args["to_date"] = args["to_date"], args["from_date"]
    return args


# Optional, realistic properties that pad a schema towards its target size. They are never
# part of gold arguments (a request does not mention them).
FILLER_PROPERTIES: tuple[tuple[str, JsonObject], ...] = (
    ("note", {"type": "string", "description": "Free-text note kept with the request for the "
              "audit log.", "maxLength": 500}),
    ("channel", {"type": "string", "description": "Channel the request came in through.",
                 "enum": ["web", "mobile", "branch", "phone"]}),
    ("dry_run", {"type": "boolean", "description": "Validate the request without applying "
                 "any change.", "default": False}),
    ("idempotency_key", {"type": "string", "description": "Client-chosen key that makes "
                         "retries safe.", "minLength": 8, "maxLength": 64}),
    ("locale", {"type": "string", "description": "Language and region for messages, such as "
                "en-GB.", "pattern": "^[a-z]{2}-[A-Z]{2}$"}),
    ("notify_customer", {"type": "boolean", "description": "Send the customer a "
                         "confirmation message when done.", "default": True}),
    ("requested_by", {"type": "string", "description": "Email address of the employee making "
                      "the request.", "format": "email"}),
    ("labels", {"type": "array", "description": "Labels to attach for reporting.",
                "items": {"type": "string", "maxLength": 30}, "maxItems": 10,
                "uniqueItems": True}),
    ("timezone", {"type": "string", "description": "IANA time zone used to read dates, such "
                  "as Europe/Paris.", "maxLength": 40}),
)

SCHEMA_SENTENCES: tuple[str, ...] = (
    "Unknown fields are rejected.",
    "Dates use ISO 8601 (YYYY-MM-DD).",
    "Identifiers are case-sensitive.",
    "Amounts are in major currency units.",
    "Omitted optional fields take the account defaults.",
    "Strings are trimmed before validation.",
    "Every call is written to the audit log.",
    "The response echoes the stored record.",
    "Calls are rate-limited per customer.",
)


def build_parameters(
    params: Sequence[Param], *, required: Sequence[str], rng: random.Random,
    fill_chars: int = SCHEMA_FILL_CHARS,
) -> JsonObject:
    """A leaf's `parameters` schema: `params`, then optional filler properties and a summary
    sentence or two, added greedily until `json.dumps` of it is near `fill_chars` characters.
    """
    properties: JsonObject = {p.name: p.schema() for p in params}
    fillers = list(FILLER_PROPERTIES)
    rng.shuffle(fillers)
    # Leave room for at least one sentence of description after the fillers.
    for name, fragment in fillers:
        if name in properties:
            continue
        trial = {**properties, name: fragment}
        if _schema_chars(trial, required, "") + 60 <= fill_chars:
            properties = trial
    sentences = list(SCHEMA_SENTENCES)
    rng.shuffle(sentences)
    description = ""
    for sentence in sentences:
        trial_text = f"{description} {sentence}".strip()
        if _schema_chars(properties, required, trial_text) <= fill_chars:
            description = trial_text
    schema = _assemble(properties, required, description)
    size = len(json.dumps(schema))
    if not SCHEMA_MIN_CHARS <= size <= SCHEMA_MAX_CHARS:
        raise RuntimeError(f"schema of {size} characters is outside "
                           f"[{SCHEMA_MIN_CHARS}, {SCHEMA_MAX_CHARS}]: {list(properties)}")
    return schema


def _assemble(properties: JsonObject, required: Sequence[str], description: str) -> JsonObject:
    schema: JsonObject = {"type": "object"}
    if description:
        schema["description"] = description
    schema["properties"] = properties
    schema["required"] = list(required)
    schema["additionalProperties"] = False
    return schema


def _schema_chars(properties: JsonObject, required: Sequence[str], description: str) -> int:
    return len(json.dumps(_assemble(properties, required, description)))


# -- trees --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RouterSpec:
    """An internal node as a leaf's ancestor: name and description."""

    name: str
    description: str


@dataclass(frozen=True)
class LeafSpec:
    """A capability: name, description, argument schema, and whether it needs confirmation."""

    name: str
    description: str
    parameters: JsonObject
    is_sensitive: bool = False

    def to_node(self) -> JsonObject:
        node: JsonObject = {"name": self.name, "description": self.description,
                            "parameters": self.parameters}
        if self.is_sensitive:
            node["sensitive"] = True
        return node


@dataclass(frozen=True)
class PlacedLeaf:
    """A leaf and the routers from the root's child down to its parent."""

    routers: tuple[RouterSpec, ...]
    leaf: LeafSpec


def build_tree(root: RouterSpec, placed: Sequence[PlacedLeaf]) -> JsonObject:
    """The catalog root node: routers created on first use, children in insertion order.

    >>> leaf = LeafSpec("pay_rent", "Pay the rent.", {"type": "object"})
    >>> tree = build_tree(RouterSpec("root", "Home."), [PlacedLeaf((RouterSpec("bills", "B."),), leaf)])
    >>> [p for p, _ in iter_leaves(tree)]
    ['bills/pay_rent']
    """  # noqa: E501
    root_node: JsonObject = {"name": root.name, "description": root.description, "children": []}
    routers: dict[tuple[str, ...], JsonObject] = {(): root_node}
    for item in placed:
        key: tuple[str, ...] = ()
        parent = root_node
        for spec in item.routers:
            key = (*key, spec.name)
            node = routers.get(key)
            if node is None:
                node = {"name": spec.name, "description": spec.description, "children": []}
                _add_child(parent, node)
                routers[key] = node
            elif node["description"] != spec.description:
                raise ValueError(f"router {'/'.join(key)} placed with two descriptions")
            parent = node
        _add_child(parent, item.leaf.to_node())
    return root_node


def _add_child(parent: JsonObject, child: JsonObject) -> None:
    if any(c["name"] == child["name"] for c in parent["children"]):
        raise ValueError(f"duplicate name {child['name']!r} under {parent['name']!r}")
    parent["children"].append(child)


def iter_leaves(node: JsonObject, prefix: str = "") -> Iterator[tuple[str, JsonObject]]:
    """(tree path, leaf node) in depth-first order; paths start below the root."""
    for child in node.get("children", []):
        path = f"{prefix}/{child['name']}" if prefix else child["name"]
        if "children" in child:
            yield from iter_leaves(child, path)
        else:
            yield path, child


def tree_depth(node: JsonObject) -> int:
    """Edges from the root to its deepest leaf: the routing calls a leaf takes."""
    children = node.get("children")
    if not children:
        return 0
    return 1 + max(tree_depth(c) for c in children)


def flatten_catalog(tree: JsonObject, *, description: str) -> JsonObject:
    """The flat twin: every leaf a direct child of one root, with its `tree_path` kept."""
    children = [{**leaf, "tree_path": path} for path, leaf in iter_leaves(tree)]
    names = [c["name"] for c in children]
    if len(set(names)) != len(names):
        raise ValueError("leaf names are not unique, so the catalog has no flat twin")
    return {"name": tree["name"], "description": description, "children": children}


def to_flat_path(tree_path: str) -> str:
    """The path of a leaf in the flat twin: its name.

    >>> to_flat_path("payments/cards/freeze_card")
    'freeze_card'
    """
    return tree_path.rsplit("/", 1)[-1]


def flat_queries(queries: Sequence[QueryRecord]) -> list[QueryRecord]:
    """The same queries with gold paths mapped into the flat twin."""
    return [QueryRecord(id=q["id"], query=q["query"],
                        gold=[to_flat_path(p) for p in q["gold"]],
                        args=q["args"], tags=q["tags"]) for q in queries]


def balanced_widths(count: int, *, max_branching: int) -> tuple[int, ...]:
    """Children per level, top down, of a balanced tree over `count` items.

    Every level is `max_branching` wide except, when `count` is not a power of it, the level
    just below the root, so the top menu stays full. `count` must be r·k^j with r ≤ k.

    >>> balanced_widths(32, max_branching=4)
    (4, 2, 4)
    """
    if count < 2 or max_branching < 2:
        raise ValueError(f"need at least 2 items and branching 2, got {count}, {max_branching}")
    levels, capacity = 1, max_branching
    while capacity < count:
        levels, capacity = levels + 1, capacity * max_branching
    if levels == 1:
        return (count,)
    lower = capacity // max_branching  # items under one child of the root when full
    remainder, rest = divmod(count, lower)
    if rest or remainder > max_branching:
        raise ValueError(f"{count} items do not fill a balanced tree of branching "
                         f"{max_branching}: use r*{max_branching}**j with r <= {max_branching}")
    widths = [max_branching] * levels
    widths[1] = remainder
    return tuple(widths)


PEOPLE: tuple[str, ...] = (
    "Asha Rao", "Ben Okafor", "Chen Wei", "Dana Silva", "Elif Yilmaz", "Farah Haddad",
    "Gustavo Lima", "Hana Sato", "Ivan Petrov", "Jonas Berg", "Kemi Adeyemi", "Lucia Romero",
    "Mateo Cruz", "Nadia Karimi", "Omar Said", "Priya Nair", "Quinn Murphy", "Rosa Alvarez",
    "Sven Larsen", "Tara Singh",
)
