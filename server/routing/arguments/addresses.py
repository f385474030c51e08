"""Street addresses a request writes, as one value: a house number, the street's words and its
kind ("Rd", "Street", "Ave"), a unit ("Apt 3"), and where a US state code follows, the city,
the state and the ZIP code ("1200 Elm Street, Springfield, IL 62704"). Written as an address is
written: each word capitalised as a name ("77 harbor view ln" -> "77 Harbor View Ln"), the state
in capitals, commas before the city and the state; the ZIP left out where another property of
the leaf holds it. A city without a state cannot be told from the words after it, so the street
is the value then. A property wants one where its name or description says address or street
(not an e-mail, IP or web address).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from stackroute.server.embeddings.words import split_name
from stackroute.server.routing.arguments.candidate import Candidate
from stackroute.server.routing.arguments.regions import codes_of

_KINDS = ["street", "st", "avenue", "ave", "road", "rd", "drive", "dr", "lane", "ln",
          "boulevard", "blvd", "way", "court", "ct", "place", "pl", "terrace", "ter", "parkway",
          "pkwy", "circle", "cir", "highway", "hwy", "square", "sq", "trail", "trl", "loop", "row",
          "close", "crescent", "cres"]
_STREET = re.compile(
    r"(?<![\w-])(?P<street>\d{1,6}[A-Za-z]?\s+(?:[NSEW]\.?\s+)?(?:[A-Za-z][\w'.-]*\s+){0,3}?"
    r"(?:" + "|".join(_KINDS) + r")\b\.?)"
    r"(?P<unit>,?\s+(?:apt|apartment|unit|suite|ste|#)\.?\s*[\w-]+)?"
    r"(?:,?\s+(?P<city>[A-Za-z][A-Za-z.'-]*(?:\s+[A-Za-z][A-Za-z.'-]*){0,2}?),?\s+"
    r"(?P<state>[A-Za-z]{2})\b(?:\s+(?P<zip>\d{5}(?:-\d{4})?))?)?", re.IGNORECASE)
_ADDRESS_WORDS = frozenset(("address", "street"))
_NOT_STREET = frozenset(("email", "ip", "mac", "web", "url", "wallet"))
_ZIP_WORDS = frozenset(("zip", "postal", "postcode", "zipcode"))


def wants_address(words: Sequence[str], schema: Mapping[str, Any]) -> bool:
    """Whether a property (its name's `words`, its `schema`) holds a street address."""
    described = re.sub(r"(?i)\be-mail", "email", str(schema.get("description", "")))
    said = {*words, *split_name(described)}
    return bool(said & _ADDRESS_WORDS) and not said & _NOT_STREET \
        and schema.get("format") not in ("email", "ipv4", "ipv6", "uri")


def address_candidates(text: str, siblings: Sequence[str], *,
                       prior: float) -> list[Candidate]:
    """The street addresses `text` writes, as addresses are written, at `prior`.

    >>> [c.value for c in address_candidates("to 12 main st, austin tx 78701", (), prior=3.0)]
    ['12 Main St, Austin, TX 78701']
    """
    keeps_zip = not any(set(split_name(s)) & _ZIP_WORDS for s in siblings)
    out = []
    for m in _STREET.finditer(text):
        parts = [_capitalised(m["street"])
                 + (" " + _capitalised(m["unit"].lstrip(", ")) if m["unit"] else "")]
        end = m.end("unit") if m["unit"] else m.end("street")
        if m["state"] and m["state"].upper() in codes_of("US"):
            parts += [_capitalised(m["city"]), m["state"].upper()
                      + (f" {m['zip']}" if m["zip"] and keeps_zip else "")]
            end = m.end()
        out.append(Candidate(", ".join(parts), ", ".join(parts), "address", prior,
                             (m.start(), end)))
    return out


def _capitalised(words: str) -> str:
    """Each word as a name writes it: its first letter up, a direction or a code kept in
    capitals ("W", "NE"), the rest as written where it holds a capital already."""
    return " ".join(w if any(c.isupper() for c in w) or not w[:1].isalpha()
                    else w[:1].upper() + w[1:] for w in words.split())

