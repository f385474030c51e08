"""Durations a request gives in another unit than the one its property counts in.

A property counts time in a unit its name or its description says (`duration_minutes`, "Time
to live in seconds"). A request may give the duration in another unit ("2 hours", "90 secs")
or in words ("an hour", "half an hour", "a week"): the value is the duration in the
property's unit, labelled as a number in that unit would be.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from stackroute.server.embeddings.words import singular
from stackroute.server.routing.arguments.candidate import Candidate
from stackroute.server.routing.arguments.numbers import UNIT_AFTER
from stackroute.server.routing.arguments.request_text import RequestText

_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 604800}
_SHORT = {"sec": "second", "secs": "second", "min": "minute", "mins": "minute", "hr": "hour",
          "hrs": "hour"}
# "a second" is as often the ordinal ("a second reminder"): not a duration in words
_IN_WORDS = re.compile(r"\b(?:(?P<half>half\s+an?)|an?|one)\s+(?P<unit>minute|hour|day|week)\b",
                       re.IGNORECASE)


def time_unit(words: Collection[str], units: Collection[str]) -> str | None:
    """The unit property counts time in: one its description counts in (`units`, singular)
    or one its name says (`words`); None where it says none."""
    for word in [*units, *words]:
        unit = _unit(word)
        if unit is not None:
            return unit
    return None


def duration_candidates(read: RequestText, unit: str, *, is_integer: bool,
                        prior: float) -> list[Candidate]:
    """The durations `read` gives in another unit than `unit`, or in words, as numbers of
    `unit` at `prior`: whole, or (where the property takes a fraction) halves; a duration
    that is neither in `unit` is left as the request wrote it.

    >>> read = RequestText.read("Book it for 2 hours, or half an hour, not 90 secs")
    >>> [(c.value, c.text) for c in duration_candidates(read, "minute", is_integer=True,
    ...                                                  prior=2.0)]
    [(120, '120'), (30, '30')]
    """
    text = read.text
    found: list[tuple[float, tuple[int, int]]] = []
    for number in read.numbers:
        if any(a <= number.span[0] < b for a, b in read.when):
            continue  # a date's or a clock time's digits
        after = UNIT_AFTER.match(text, number.span[1])
        given = _unit(after[1]) if after else None
        if after and given is not None and given != unit:
            found.append((number.value * _SECONDS[given] / _SECONDS[unit],
                          (number.span[0], after.end())))
    for match in _IN_WORDS.finditer(text):
        share = 0.5 if match["half"] else 1.0
        found.append((share * _SECONDS[match["unit"].lower()] / _SECONDS[unit], match.span()))
    out = []
    for value, span in sorted(found, key=lambda f: f[1]):
        whole = round(value, 9) == int(value)
        if (is_integer and not whole) or round(value * 2, 9) != int(value * 2):
            continue  # a count of the unit, or half of one: "28.9 seconds" is no 0.4817 min
        number = int(value) if whole else round(value, 9)
        out.append(Candidate(number, str(number), "number", prior, span))
    return out


def _unit(word: str) -> str | None:
    word = singular(word.lower())
    word = _SHORT.get(word, word)
    return word if word in _SECONDS else None
