"""An array's value from the request: every value of its items' kind the request holds, in
the request's order ("with ana@example.com and bo@example.com" gives `attendees` both).

Only kinds a request writes to be copied make a list: e-mail addresses, phone numbers, URLs,
paths and IP addresses, enum words, and ids of the shape the items' pattern writes
("TEN-00417 and TEN-00418" for `^TEN-\\d{5}$`). A list of free words ("labelled finance") is not
guessed: the model writes it under the schema (the fallback). The list is one candidate, so
a single list needs no model call. An optional array is filled only with values of its own
kind (e-mails, phones, enum words): a URL in the request is not a list of tags.

>>> from stackroute.server.routing.arguments.candidates import candidates
>>> schema = {"type": "array", "items": {"type": "string", "format": "email"}}
>>> [c.value for c in candidates("attendees", schema, "Invite a@x.io, then b@y.org.")]
[['a@x.io', 'b@y.org']]
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from stackroute.grammars.container_caps import MAX_ITEMS
from stackroute.server.routing.arguments.candidate import Candidate
from stackroute.server.routing.arguments.pattern_forms import is_structured
from stackroute.server.routing.arguments.request_text import RequestText
from stackroute.server.routing.arguments.spans import LeafWords

LIST_KINDS = frozenset(("email", "phone", "literal", "enum"))
TYPED_KINDS = frozenset(("email", "phone", "enum"))  # only this property's kind of value
LIST_PRIOR = 3.0  # a list of e-mails, phone numbers or enum words: what the items are
LITERAL_LIST_PRIOR = 1.0  # a list of URLs, paths or addresses for any list of strings

Element = Callable[..., list[Candidate]]  # candidates() for one item


def list_candidates(name: str, schema: Mapping[str, Any], request: RequestText, *,
                    siblings: Mapping[str, Mapping[str, Any]], topic: LeafWords,
                    element: Element) -> list[Candidate]:
    """The array of every copyable value of the items' kind, or nothing."""
    items = schema.get("items")
    if not isinstance(items, Mapping) or items.get("type") in ("array", "object"):
        return []
    described = {**items, "description": items.get("description")
                 or schema.get("description", "")}
    pattern = items.get("pattern")
    # a pattern of an id's own shape takes only ids written to be copied ("TEN-00417")
    shaped = isinstance(pattern, str) and is_structured(pattern)
    found = [c for c in element(name, described, request, siblings=siblings, topic=topic)
             if (c.kind in LIST_KINDS or shaped) and c.prior > 0]
    values: list[Any] = []
    for candidate in sorted(found, key=lambda c: _place(c, request.text)):
        if candidate.value not in values:
            values.append(candidate.value)
    limit = schema.get("maxItems", MAX_ITEMS)
    values = values[:limit if isinstance(limit, int) else MAX_ITEMS]
    least = schema.get("minItems", 1)
    if not values or (isinstance(least, int) and len(values) < least):
        return []
    prior = LIST_PRIOR if shaped or any(c.kind in TYPED_KINDS for c in found) \
        else LITERAL_LIST_PRIOR
    return [Candidate(values, json.dumps(values, ensure_ascii=False), "list", prior)]


def _place(candidate: Candidate, request: str) -> int:
    """Where the request says the value: its span, else `place_of` its text."""
    return candidate.span[0] if candidate.span is not None else place_of(candidate.text, request)


def place_of(text: str, request: str) -> int:
    """Where the request first says `text` as whole words, as written or with its
    underscores and dashes as spaces ("burglar alarm" for `burglar_alarm`), whatever the
    spaces between them; its end where it does not.

    >>> place_of("burglar_alarm", "a  Burglar alarm"), place_of("x", "no")
    (3, 2)
    """
    for form in (text, re.sub(r"[_\-]+", " ", text)):
        words = r"\s+".join(re.escape(w) for w in form.split())
        found = re.search(rf"(?<!\w){words}(?!\w)", request, re.IGNORECASE) if words else None
        if found:
            return found.start()
    return len(request)
