"""Phone numbers a request writes, in the form a property wants.

A property wants a phone number where its name or its description says so ("phone", "mobile",
"MSISDN", "E.164") or its pattern writes one (E.164: a plus and digits). A number is
offered as the request writes it, or, where the pattern refuses that, as its digits: with the
plus the request writes, or the plus its international prefix "00" stands for ("00353 85 …"
is +353…), or, for a number written the North American way without its country code
("(512) 555-0187", "415.555.0142", "1-800-555-0199") where the pattern wants a plus, with +1.
A number written another country's way without its code gets no guessed code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from stackroute.server.embeddings.words import split_name
from stackroute.server.routing.arguments.candidate import Candidate
from stackroute.server.routing.arguments.pattern_forms import matches

_PHONE = re.compile(r"(?<![\w+])\+?\(?\d[\d ().-]{6,}\d(?!\w)")
PHONE_WORDS = frozenset(("phone", "mobile", "msisdn", "telephone", "tel", "fax"))
_E164 = re.compile(r"\bE\.?164\b", re.IGNORECASE)
# a North American number: three digits (in brackets or not), three, four, each group apart
_NANP = re.compile(r"(?:\+?1[ .-]?)?\(?[2-9]\d{2}\)?[ .-]?\d{3}[ .-]\d{4}")


def wants_phone(words: list[str], schema: Mapping[str, Any]) -> bool:
    """Whether a property (its name's `words`, its `schema`) holds a phone number."""
    described = str(schema.get("description", ""))
    if schema.get("format") == "phone" or PHONE_WORDS & {*words, *split_name(described)} \
            or _E164.search(described):
        return True
    pattern = schema.get("pattern")
    return isinstance(pattern, str) and matches(pattern, "+14155550142") \
        and not matches(pattern, "4155550142") and not matches(pattern, "+1 phone")


def phone_candidates(text: str, pattern: str | None, *, prior: float) -> list[Candidate]:
    """The phone numbers `text` writes, each in the first form `pattern` takes (as written,
    its digits, with +1), at `prior`.

    >>> [c.value for c in phone_candidates("call 00353 85 220 9917", "^\\\\+[0-9]+$", prior=3.0)]
    ['+353852209917']
    """
    out = []
    for match in _PHONE.finditer(text):
        written = match[0].strip()
        form = next((f for f in _forms(written) if not pattern or matches(pattern, f)), None)
        if form is not None:
            out.append(Candidate(form, form, "phone", prior, match.span()))
    return out


def _forms(written: str) -> list[str]:
    digits = re.sub(r"\D", "", written)
    forms = [written]
    if written.startswith("+"):
        forms.append("+" + digits)
    elif digits.startswith("00"):
        forms.append("+" + digits[2:])
    else:
        forms.append(digits)
        if _NANP.fullmatch(written):
            forms.append("+1" + digits[-10:])
    return forms
