"""Whether the request supports an optional property, and with which of its values.

An optional property is filled only where the request gives it a value: it names the property
(a word of its name beside a plausible value), or holds a value only this kind of property
takes (a matched enum word, a list of copyable values, a typed value such as a date or an
e-mail, a name after a place preposition for a place, an unused number with a strong prior),
or (with a `ValueMeaning`) a value that means this property more than any other of the leaf.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from stackroute.server.routing.arguments.candidate import Candidate
from stackroute.server.routing.arguments.candidates import (
    LABEL_PRIOR,
    TYPED_PRIOR,
    enum_matched,
    property_words,
    schema_of,
)
from stackroute.server.routing.arguments.cues import cue_positions, own_naming
from stackroute.server.routing.arguments.lists import LIST_PRIOR
from stackroute.server.routing.arguments.meaning import ValueMeaning
from stackroute.server.routing.arguments.sibling_labels import takes_when
from stackroute.server.routing.arguments.spans import names_a_maker, names_a_place

_WHEN_KINDS = frozenset(("date", "time"))
# Kinds a request value has only where this property wants it (a date for a date, a language
# name for a language, what follows "because" for a reason, a country's, a currency's, a
# state's or a term's code for one, a code its description explains, a latitude or a
# longitude of a pair): the request's support by itself
_OWN_KINDS = frozenset(("email", "phone", "date", "time", "language", "reason", "country",
                        "currency", "region", "term", "code", "coordinate"))
# Kinds written to be copied (a quote, a URL or a path, an id): at TYPED_PRIOR, a text
# property's support
_COPIED_KINDS = frozenset(("quoted", "literal", "id"))


class Offer(NamedTuple):
    """What a property's choice is over: its candidates, and whether `NONE` is among them."""

    candidates: list[Candidate]
    may_decline: bool


def offered(name: str, properties: Mapping[str, Any], found: list[Candidate], request: str,
            used: set[str], meaning: ValueMeaning | None = None) -> Offer:
    """What optional property `name` is offered of `found`: the values only its own kind
    takes (an e-mail, a phone number, a date, a time, a language name, a reason after
    "because", at TYPED_PRIOR, not in `used`), without `NONE`, and so a flag the request sets
    in words and a number its label, unit or currency marks (LABEL_PRIOR); else all of them
    and `NONE` where the request names the property (a word of its name) or holds a value only
    this kind of property takes (a name after "in", "from" or "at" for a place); else (with
    `meaning`) those that mean this property more than any other of the leaf (`meaning.py`;
    for a date or a time, only dates and times), without `NONE` (the match is the request's
    support: a model asked "is it given?" of a value the request does not label says no,
    Seal-Tools dev, the 1.5B, by 3-14 nats on gold values); else none (it stays out)."""
    prop = schema_of(properties[name])
    # such a value is the request's support, as a match by meaning is: the 1.5B asked "is it
    # given?" of a date or a time says no, named or not ("during the time period of 16:48")
    own = [c for c in found if c.kind in _OWN_KINDS and c.prior >= TYPED_PRIOR
           and c.text not in used]
    if own:
        return Offer(own, may_decline=False)
    # so is a flag the request sets in words ("*Force* stop", "do *not* notify") and a number
    # it labels with the property's name, unit or currency ("$250" for a price in dollars):
    # the 1.5B asked "is it given?" of them said no
    # (a flag only where the request says its name: "drop *off*" sets no `add_gps`)
    said = [c for c in found if c.text not in used and (
        (c.kind == "boolean" and c.prior > 0 and _says(name, properties, request))
        or (c.kind == "number" and c.prior >= LABEL_PRIOR))]
    if said:
        return Offer(said, may_decline=False)
    if _supported_by_words(name, properties, found, request, used):
        return Offer(found, may_decline=True)
    if meaning is None or "enum" in prop or prop.get("type") in ("array", "boolean"):
        return Offer([], may_decline=True)  # their values are settled by words (lists.py,
        # polarity.py): "true" means nothing of its own
    fresh = [c for c in found if c.text not in used]
    # a property named or formatted for a date or a time takes one by meaning, never other
    # words ("HVAC" is what a `start_date` is for, not when)
    if takes_when(property_words(name, prop), prop):
        fresh = [c for c in fresh if c.kind in _WHEN_KINDS]
    return Offer(meaning.matching(name, properties, fresh), may_decline=False)


def _supported_by_words(name: str, properties: Mapping[str, Any], found: list[Candidate],
                        request: str, used: set[str]) -> bool:
    prop = schema_of(properties[name])
    if "enum" in prop:
        return enum_matched(found)
    if prop.get("type") == "array":  # a list of values of its own kind (lists.py)
        return any(c.kind == "list" and c.prior >= LIST_PRIOR for c in found)
    if _says(name, properties, request) and any(c.prior > 0 for c in found):
        return True
    words = _name_words(name, prop)
    if any((names_a_place(words, c, request) or names_a_maker(words, c, request))
           and c.text not in used for c in found):
        return True
    if prop.get("type") in ("integer", "number"):
        return any(c.prior >= LABEL_PRIOR for c in found)
    # (the own kinds were offered above)
    return any(c.kind in _COPIED_KINDS and c.prior >= TYPED_PRIOR and c.text not in used
               for c in found)


def _name_words(name: str, prop: Mapping[str, Any]) -> list[str]:
    """The words of the property's name a request may say it by (three letters or more)."""
    return [w for w in property_words(name, prop) if len(w) >= 3]


def _says(name: str, properties: Mapping[str, Any], request: str) -> bool:
    """Whether the request names property `name` as a word of its own (`cue_positions`): a
    word of its name it shares with no sibling (all of them where it shares every one), or
    that word's plural, or its name as one word ("checkout" of new_check_out) where no
    sibling's is that word; never inside another word ("age" in "message", "add" in
    "address") nor in a sibling's name as one word ("checkout" beside new_check_in).

    >>> _says("tag", {"tag": {}}, "Add the tags to the post")
    True
    >>> _says("age", {"age": {}}, "Send the message")
    False
    """
    naming = own_naming(name, _name_words(name, schema_of(properties[name])),
                        [s for s in properties if s != name])
    said = naming.words + [w + "s" for w in naming.words if len(w) == 3]  # longer: a stem
    return bool(cue_positions(request, said, joined=naming.joined, unless=naming.unless))
