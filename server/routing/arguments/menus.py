"""A leaf's value menus in one request: per property, the values the request holds
(`candidates.py`), read once and shared by whoever needs them for the same leaf and request
(the abstention check's `value_coverage`, then the filler)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from stackroute.runtime.frames import RefusedArguments
from stackroute.runtime.schemas import value_checker
from stackroute.runtime.tree import Node
from stackroute.server.routing.arguments.candidate import Candidate
from stackroute.server.routing.arguments.candidates import candidates, schema_of, topic_words
from stackroute.server.routing.arguments.enums import UNSAID_PRIOR
from stackroute.server.routing.arguments.lists import place_of
from stackroute.server.routing.arguments.meaning import ValueMeaning
from stackroute.server.routing.arguments.request_text import RequestText

MEANT_PRIOR = 1.0  # an enum value the request says in other words (enums.SAID_PRIOR: 2.0)


def required_of(schema: Mapping[str, Any],
                by_property: Mapping[str, list[Candidate]]) -> tuple[str, ...]:
    """The properties a call must give: the schema's `required`, and those of the alternative
    of its `anyOf` / `oneOf` whose least sure value the request holds most surely (the first
    of equals; the first where it holds none: the value to be asked), so that a leaf that
    takes a session's id or its station and connector is given one of them ("is not valid
    under any of the given schemas" refused such calls, one after another).

    >>> schema = {"properties": {"a": {}, "b": {}, "c": {}}, "required": ["c"],
    ...           "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}
    >>> found = Candidate("x", "x", "span", 2.0)
    >>> required_of(schema, {"a": [], "b": [found], "c": []}), required_of(schema, {})
    (('c', 'b'), ('c', 'a'))
    """
    properties: Mapping[str, Any] = schema.get("properties") or {}
    required = [n for n in schema.get("required") or () if n in properties]
    alternatives = [[n for n in alt.get("required") or () if n in properties]
                    for key in ("anyOf", "oneOf") for alt in schema.get(key) or ()
                    if isinstance(alt, Mapping)]
    alternatives = [alt for alt in alternatives if alt]
    if alternatives and not any(set(alt) <= set(required) for alt in alternatives):
        # the alternative whose least sure value is surest: "around 33.0198, -96.6989" gives
        # both coordinates as coordinates, above an address that could be any span
        sure = [min(max((c.prior for c in by_property.get(n, ())), default=0.0) for n in alt)
                for alt in alternatives]
        best = max(range(len(alternatives)), key=lambda k: (sure[k] > 0, sure[k], -k))
        required += [n for n in alternatives[best] if n not in required]
    return tuple(required)


@dataclass(frozen=True)
class ValueMenus:
    """A leaf's value candidates in one request, per property: the request read once
    (`RequestText`), and shared by whoever needs them for the same leaf and request (the
    abstention check's `value_coverage`, then the filler)."""

    leaf: str  # the leaf's path
    task: str
    required: tuple[str, ...]  # in the schema's `required` order
    order: tuple[str, ...]  # the required properties, then the optional ones in schema order
    by_property: Mapping[str, list[Candidate]]

    @classmethod
    def read(cls, leaf: Node, task: str) -> ValueMenus:
        schema: Mapping[str, Any] = leaf.parameters or {}
        properties: Mapping[str, Any] = schema.get("properties") or {}
        topic = topic_words(leaf.name, leaf.description or "")
        text = RequestText.read(task)
        by_property = {name: candidates(name, schema_of(properties[name]), text,
                                        siblings={n: schema_of(properties[n])
                                                  for n in properties if n != name},
                                        topic=topic)
                       for name in properties}
        required = required_of(schema, by_property)
        order = required + tuple(n for n in properties if n not in required)
        return cls(leaf.path_str, task, required, order,
                   {name: by_property[name] for name in order})

    def checked(self, leaf: Node, task: str) -> ValueMenus:
        """These menus, where they were read for `leaf` and `task` (a caller's bug else)."""
        if (self.leaf, self.task) != (leaf.path_str, task):
            raise ValueError(f"value menus read for {self.leaf!r} on {self.task!r}, "
                             f"used for {leaf.path_str!r} on {task!r}")
        return self

    def refusing(self, refused: Sequence[RefusedArguments]) -> ValueMenus:
        """These menus without the values the leaf's schema refused for a property it named
        (`refused`: this frame's earlier calls of the leaf): a deterministic choice would
        otherwise make the same refused call again."""
        gone = {(name, _key(r.arguments[name])) for r in refused if r.leaf == self.leaf
                for name in r.properties if name in r.arguments}
        if not gone:
            return self
        kept = {name: [c for c in found if (name, _key(c.value)) not in gone]
                for name, found in self.by_property.items()}
        return ValueMenus(self.leaf, self.task, self.required, self.order, kept)


    def meant(self, properties: Mapping[str, Any], meaning: ValueMeaning) -> ValueMenus:
        """These menus with each required enum of words the request says no value of given
        the value it says in other words (`ValueMeaning.enum_value`: "robbed" for `stolen`)
        at MEANT_PRIOR: above the values not said, below a value said. A required enum takes
        some value, and this one over the first; an optional one stays out unless the request
        says its value (by meaning, "morning" was `evening`, "the patient" `patient_request`
        on held-out desks: an optional value made up); and each list of enum words with the
        items the request says in other words (`_grown`)."""
        kept = dict(self.by_property)
        for name in self.required:
            found = self.by_property[name]
            enum = schema_of(properties.get(name)).get("enum")
            if not isinstance(enum, list) or not all(isinstance(v, str) for v in enum) \
                    or any(c.kind == "enum" and c.prior > UNSAID_PRIOR for c in found):
                continue
            value = meaning.enum_value(enum, self.task)
            if value is not None:
                kept[name] = sorted((replace(c, prior=MEANT_PRIOR) if c.value == value else c
                                     for c in found), key=lambda c: -c.prior)
        for name in self.order:
            grown = self._grown(name, schema_of(properties.get(name)), meaning)
            if grown is not None:
                kept[name] = [grown] + [c for c in kept[name] if c.kind != "list"]
        return ValueMenus(self.leaf, self.task, self.required, self.order, kept)

    def _grown(self, name: str, schema: Mapping[str, Any],
               meaning: ValueMeaning) -> Candidate | None:
        """A list of enum words with the items the request says in other words
        (`ValueMeaning.meant_values`: "by text and email" for `["sms", "email"]`), in the
        request's order: the list its words started, or, for a required list, a new one at
        MEANT_PRIOR; None where it gains nothing (an optional list no word of the request
        starts stays out, as an optional enum does)."""
        enum = schema_of(schema.get("items")).get("enum")
        if schema.get("type") != "array" or not isinstance(enum, list) \
                or not all(isinstance(v, str) for v in enum):
            return None
        listed = next((c for c in self.by_property[name] if c.kind == "list"), None)
        if listed is None and name not in self.required:
            return None
        said = list(listed.value) if listed is not None else []
        meant = {v: place_of(words, self.task)
                 for v, words in meaning.meant_values(enum, self.task).items() if v not in said}
        if not meant:
            return None
        where = {v: place_of(v, self.task) for v in said} | meant
        limit = schema.get("maxItems")
        items = sorted(where, key=lambda v: where[v])[:limit if isinstance(limit, int) else None]
        if not value_checker(schema)(items):
            return None  # too few for its minItems, say: the list stays as its words made it
        return Candidate(items, json.dumps(items, ensure_ascii=False), "list",
                         listed.prior if listed is not None else MEANT_PRIOR)


def _key(value: Any) -> str:
    """A value compared as JSON (a list or an object is no dict key)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)
