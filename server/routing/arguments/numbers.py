"""Numbers a request holds, with their multipliers and thousands separators normalised.

>>> [n.value for n in find_numbers("Send $1.2M, then 5k and 2,000 more")]
[1200000, 5000, 2000]
>>> [(n.value, n.text) for n in find_numbers("a mass of 37.5 kg at 14.3 m/s^2")]
[(37.5, '37.5'), (14.3, '14.3')]
>>> [(n.value, n.span) for n in find_numbers("the 51st floor")]  # the ordinal's span: its noun
[(51, (4, 8))]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_WORD_MULTIPLIERS = {"thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000,
                     "trillion": 1_000_000_000_000}
# Attached suffixes: "5k", "1.2M", "3bn". A bare lower-case "m" is metres unless money is
# being written ("$5m"), so it multiplies only after a currency sign.
_SUFFIX_MULTIPLIERS = {"k": 1_000, "K": 1_000, "M": 1_000_000, "B": 1_000_000_000,
                       "bn": 1_000_000_000, "b": 1_000_000_000}
_SMALL_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
                "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15,
                "twenty": 20, "thirty": 30, "fifty": 50, "hundred": 100, "dozen": 12}
_NUMBER = re.compile(
    r"(?<![\w.\-/:^])(?P<currency>[$€£¥])?\s?(?P<sign>-)?"
    r"(?P<digits>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?:(?P<suffix>bn|[kKMBbm])(?![A-Za-z0-9])|\s+(?P<word>thousand|million|billion|trillion)\b"
    r"|(?P<percent>%)|(?P<ordinal>st|nd|rd|th)(?![A-Za-z]))?"
    r"(?![\w/:-]*\d)(?!\.\d)")
_WORDS = re.compile(r"\b(" + "|".join(_SMALL_WORDS) + r")\b", re.IGNORECASE)


@dataclass(frozen=True)
class FoundNumber:
    value: int | float  # an int where the number is whole
    text: str  # the digits as the request wrote them ("37.5", "2,000" → "2,000")
    span: tuple[int, int]  # where in the request (the whole match, multiplier included)
    is_money: bool = False
    is_percent: bool = False


def find_numbers(text: str) -> list[FoundNumber]:
    """Every number in `text` in order: digits (with "," thousands, a multiplier suffix or
    word, a currency sign, a percent or an ordinal's "st", "nd", "rd", "th"), then small
    number words ("five", "a dozen")."""
    out: list[FoundNumber] = []
    for match in _NUMBER.finditer(text):
        digits = match["digits"]
        value: float = float(digits.replace(",", ""))
        suffix, word = match["suffix"], match["word"]
        if suffix == "m" and not match["currency"]:
            suffix = None  # "5m": five metres
        elif suffix in ("b",) and not match["currency"]:
            suffix = None  # "5b": a label, not billions
        if suffix is not None:
            value *= _SUFFIX_MULTIPLIERS.get(suffix, 1_000_000)
        if word is not None:
            value *= _WORD_MULTIPLIERS[word.lower()]
        if match["sign"]:
            value = -value
        end = match.end() if (suffix is not None or word or match["percent"]
                              or match["ordinal"]) \
            else match.end("digits")
        out.append(FoundNumber(value=_whole(value), text=digits,
                               span=(match.start(), end),
                               is_money=match["currency"] is not None,
                               is_percent=match["percent"] is not None))
    taken = [n.span for n in out]
    for match in _WORDS.finditer(text):
        if any(a <= match.start() < b for a, b in taken):
            continue
        out.append(FoundNumber(value=_SMALL_WORDS[match[1].lower()], text=match[1],
                               span=(match.start(), match.end())))
    return sorted(out, key=lambda n: n.span)


def _whole(value: float) -> int | float:
    """`value` as an int when whole and exactly representable (1200000.0 → 1200000)."""
    rounded = round(value, 9)
    return int(rounded) if rounded == int(rounded) and abs(rounded) < 2 ** 53 else value
