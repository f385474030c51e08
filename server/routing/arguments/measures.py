"""Measures a request gives in another unit than the one its property counts in.

A property counts time, mass, length, data, volume or money in a unit its name or its
description says (`duration_minutes`, `weight_kg`, `volume_ul`, `amount_cents`, "Time to live
in seconds", "Gross weight in kg"). A request may give the measure in another unit of the same
kind ("2 hours", "22.5 tonnes", "500 MB", "1.5 mL" for microlitres, "$1.2k" for cents) or, for
time, in words ("an hour", "half an hour", "a week"): the value is the measure in the
property's unit, labelled as a number in that unit would be. Only units that convert exactly
and mean one size (no pounds to kilograms, no "ton": 907 kg in the US, no gallon: US or
imperial), and only to whole units or halves. An amount of money is one written with a
currency sign or word; its cents are a hundredth of it, whatever the currency.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import NamedTuple

from stackroute.server.embeddings.words import singular
from stackroute.server.routing.arguments.candidate import Candidate
from stackroute.server.routing.arguments.money import money_word
from stackroute.server.routing.arguments.numbers import UNIT_AFTER
from stackroute.server.routing.arguments.request_text import RequestText


class Unit(NamedTuple):
    kind: str  # time | mass | length | data | volume | money
    size: float  # in the kind's base unit: seconds, grams, metres, bytes, microlitres, cents


_UNITS = {
    "second": Unit("time", 1), "minute": Unit("time", 60), "hour": Unit("time", 3600),
    "day": Unit("time", 86400), "week": Unit("time", 604800),
    "g": Unit("mass", 1), "kg": Unit("mass", 1e3), "tonne": Unit("mass", 1e6),
    "mm": Unit("length", 1e-3), "cm": Unit("length", 1e-2), "m": Unit("length", 1),
    "km": Unit("length", 1e3),
    "kb": Unit("data", 1e3), "mb": Unit("data", 1e6), "gb": Unit("data", 1e9),
    "tb": Unit("data", 1e12),
    "ul": Unit("volume", 1), "ml": Unit("volume", 1e3), "l": Unit("volume", 1e6),
    "cent": Unit("money", 1), "money": Unit("money", 100),  # an amount in dollars, euros, …
}
_ALIASES = {
    "sec": "second", "secs": "second", "min": "minute", "mins": "minute", "hr": "hour",
    "hrs": "hour", "gram": "g", "kilogram": "kg", "kilo": "kg", "kgs": "kg", "t": "tonne",
    "millimetre": "mm", "millimeter": "mm", "centimetre": "cm", "centimeter": "cm",
    "metre": "m", "meter": "m", "kilometre": "km", "kilometer": "km", "kms": "km",
    "kilobyte": "kb", "megabyte": "mb", "gigabyte": "gb", "gig": "gb", "terabyte": "tb",
    "microlitre": "ul", "microliter": "ul", "millilitre": "ml", "milliliter": "ml", "cc": "ml",
    "litre": "l", "liter": "l", "ltr": "l",
}
# a property's unit is a word of two letters or more ("m" or "t" of a name says nothing)
_NAMED = 2
# "a second" is as often the ordinal ("a second reminder"): not a duration in words
_IN_WORDS = re.compile(r"\b(?:(?P<half>half\s+an?)|an?|one)\s+(?P<unit>minute|hour|day|week)\b",
                       re.IGNORECASE)


def measure_unit(words: Collection[str], units: Collection[str]) -> str | None:
    """The unit a property counts in: one its description counts in (`units`, singular)
    or one its name says (`words`); None where it says none. Money counts in a currency's
    hundredths where it says so (`amount_cents`); an amount in dollars is as written."""
    for word in [*units, *words]:
        unit = _unit(word) if len(word) >= _NAMED else None
        if unit is not None and unit != "money":
            return unit
    return None


def measure_candidates(read: RequestText, unit: str, *, is_integer: bool,
                       prior: float) -> list[Candidate]:
    """The measures `read` gives in another unit of `unit`'s kind than `unit` (or, for time,
    in words), as numbers of `unit` at `prior`: whole, or (where the property takes a
    fraction) halves; a measure that is neither in `unit` is left as the request wrote it.

    >>> read = RequestText.read("Book it for 2 hours, or half an hour, not 90 secs")
    >>> [(c.value, c.text) for c in measure_candidates(read, "minute", is_integer=True,
    ...                                                 prior=2.0)]
    [(120, '120'), (30, '30')]
    """
    text = read.text
    wanted = _UNITS[unit]
    found: list[tuple[float, tuple[int, int]]] = []
    for number in read.numbers:
        if any(a <= number.span[0] < b for a, b in read.when):
            continue  # a date's or a clock time's digits
        after = UNIT_AFTER.match(text, number.span[1])
        given = _unit(after[1]) if after else None
        end = after.end() if after else number.span[1]
        if number.is_money and given is None:
            given, end = "money", number.span[1]  # "$1.2k"
        if given is not None and given != unit and _UNITS[given].kind == wanted.kind:
            found.append((number.value * _UNITS[given].size / wanted.size,
                          (number.span[0], end)))
    if wanted.kind == "time":
        for match in _IN_WORDS.finditer(text):
            share = 0.5 if match["half"] else 1.0
            found.append((share * _UNITS[match["unit"].lower()].size / wanted.size,
                          match.span()))
    out = []
    for value, span in sorted(found, key=lambda f: f[1]):
        whole = round(value, 9) == int(value)
        if (is_integer and not whole) or round(value * 2, 9) != int(value * 2):
            continue  # a count of the unit, or half of one: "28.9 seconds" is no 0.4817 min
        number = int(value) if whole else round(value, 9)
        out.append(Candidate(number, str(number), "number", prior, span))
    return out


# short forms of units that convert to no other here (a month is no fixed number of days)
_SHORT_NAMES = {"yr": "year", "yrs": "year", "mo": "month", "mos": "month", "mth": "month",
                "mths": "month", "wk": "week", "wks": "week", "hr": "hour", "hrs": "hour",
                "min": "minute", "mins": "minute", "sec": "second", "secs": "second",
                "mi": "mile"}


# an area's unit, after a number ("320 sq ft", "1,140 sq. ft.", "85 m2", "12 square metres")
# or in a property's name or description (`area_sqft`, "in square feet"): its one short name
_AREA_LENGTHS = {"ft": "ft", "feet": "ft", "foot": "ft", "m": "m", "metre": "m", "metres": "m",
                 "meter": "m", "meters": "m", "km": "km", "yd": "yd", "yard": "yd",
                 "yards": "yd", "mi": "mi", "mile": "mi", "miles": "mi"}
_LENGTH = "|".join(sorted(_AREA_LENGTHS, key=len, reverse=True))
_AREA_AFTER = re.compile(rf"\s*(?:(?:sq\.?|square)\s*(?P<length>{_LENGTH})\b\.?"
                         rf"|(?P<joined>sq(?:ft|m|km|yd|mi))\b|(?P<power>ft|m|km)(?:2|²))",
                         re.IGNORECASE)
_AREA_NAMED = re.compile(rf"(?<![a-z])(?:sq_?(?P<short>ft|m|km|yd|mi)"
                         rf"|square[\s_]+(?P<length>{_LENGTH}))(?![a-z])", re.IGNORECASE)


def area_after(text: str, end: int) -> str | None:
    """The area unit written right after a number ending at `end`, as "sq" and its length.

    >>> [area_after(t, 3) for t in ("320 sq ft", "320 sq. ft.", "320 sqft", "320 m²", "320 ft")]
    ['sqft', 'sqft', 'sqft', 'sqm', None]
    """
    found = _AREA_AFTER.match(text, end)
    if found is None:
        return None
    if found["joined"]:
        return found["joined"].lower()
    return "sq" + _AREA_LENGTHS[(found["length"] or found["power"]).lower()]


def area_named(text: str) -> str | None:
    """The area unit a property's name or description counts in, as `area_after` writes it.

    >>> [area_named(t) for t in ("square_footage_sqft", "Floor area in square metres.",
    ...                          "lot_sq_ft", "square_footage")]
    ['sqft', 'sqm', 'sqft', None]
    """
    found = _AREA_NAMED.search(text)
    if found is None:
        return None
    return "sq" + _AREA_LENGTHS[(found["short"] or found["length"]).lower()]


def unit_name(word: str) -> str:
    """A unit word as a property's name or description would say it: singular, short forms
    written out ("yrs" -> "year", "mins" -> "minute")."""
    word = word.lower()
    return _SHORT_NAMES.get(word, singular(word))


def _unit(word: str) -> str | None:
    if money_word(word) is not None:  # "dollars", "usd": an amount in a currency
        return "money"
    word = word.lower()
    word = _ALIASES.get(word, _ALIASES.get(singular(word), singular(word)))
    return word if word in _UNITS else None
