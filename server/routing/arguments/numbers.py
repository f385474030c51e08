"""Numbers a request holds, with their multipliers and thousands separators normalised.

>>> [n.value for n in find_numbers("Send $1.2M, then 5k and 2,000 more")]
[1200000, 5000, 2000]
>>> [(n.value, n.text) for n in find_numbers("a mass of 37.5 kg at 14.3 m/s^2")]
[(37.5, '37.5'), (14.3, '14.3')]
>>> [n.is_money for n in find_numbers("$5, 5 euros, a 5 dollar fee, 5 kg")]
[True, True, True, False]
>>> [(n.value, n.span) for n in find_numbers("the 51st floor")]  # the ordinal's span: its noun
[(51, (4, 8))]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from stackroute.server.routing.arguments.money import money_word

_WORD_MULTIPLIERS = {"thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000,
                     "trillion": 1_000_000_000_000, "grand": 1_000}
# Attached suffixes: "5k", "1.2M", "3bn". A bare lower-case "m" is metres unless money is
# being written ("$5m"), so it multiplies only after a currency sign.
_SUFFIX_MULTIPLIERS = {"k": 1_000, "K": 1_000, "M": 1_000_000, "B": 1_000_000_000,
                       "bn": 1_000_000_000, "b": 1_000_000_000}
# Numbers said in words: units and tens add ("twenty-five"), "hundred" multiplies what stands
# before it, a scale closes a group ("two hundred and fifty thousand"); "grand" is a thousand
# after a number ("fifteen grand", "15 grand"); "a dozen" is 12
_UNIT_WORDS = {w: n for n, w in enumerate([
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen"])}
_TEN_WORDS = {w: 10 * n for n, w in enumerate(
    ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], 2)}
_SCALE_WORDS = {"thousand": 1_000, "grand": 1_000, "million": 1_000_000,
                "billion": 1_000_000_000}
_NUMBER_WORDS = {**_UNIT_WORDS, **_TEN_WORDS, "hundred": 100, "dozen": 12, **_SCALE_WORDS}
_SIGN = re.compile(r"[$€£¥]")  # a currency's sign, written before an amount
_NUMBER = re.compile(
    r"(?<![\w.\-/:^])(?P<currency>[$€£¥])?\s?(?P<sign>-)?"
    r"(?P<digits>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?:(?P<suffix>bn|[kKMBbm])(?![A-Za-z0-9])|\s+(?P<word>thousand|million|billion|trillion|grand)\b"
    r"|(?P<percent>%)|(?P<ordinal>st|nd|rd|th)(?![A-Za-z]))?"
    r"(?![\w/:-]*\d)(?!\.\d)")
# two numbers joined by a dash, neither of them part of a longer run of groups (a phone number,
# a date): "140k-165k", "$50 - $100", "10–20"
_END = r"[$€£¥]?\d[\d,.]*(?:bn|[kKMB%])?"
_RANGE = re.compile(rf"(?<![\w.\-/:^])(?P<low>{_END})\s?[-–]\s?(?P<high>{_END})(?![\w/:-]*\d)")
_TO = re.compile(r"\s*(?:[-–]|to|through)\s*", re.IGNORECASE)
_AND = re.compile(r"\s+and\s+", re.IGNORECASE)
_BETWEEN = re.compile(r"\bbetween\s+$", re.IGNORECASE)
UNIT_AFTER = re.compile(r"\s*-?\s*([A-Za-z]+)")  # the word after a number: its unit, if any
_WORD = r"(?:" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True)) + r")"
_WORDS = re.compile(rf"\b{_WORD}(?:(?:\s+and\s+|[\s-]+){_WORD})*\b", re.IGNORECASE)


@dataclass(frozen=True)
class FoundNumber:
    value: int | float  # an int where the number is whole
    text: str  # the digits as the request wrote them ("37.5", "2,000" → "2,000")
    span: tuple[int, int]  # where in the request (the whole match, multiplier included)
    is_money: bool = False  # written with a currency's sign or word ("$5", "5 euros")
    is_percent: bool = False
    range_part: int = 0  # 1: the low end of a range ("140k" of "140k-165k"), 2: its high end


def find_numbers(text: str) -> list[FoundNumber]:
    """Every number in `text` in order: digits (with "," thousands, a multiplier suffix or
    word, a currency sign, a percent or an ordinal's "st", "nd", "rd", "th"), then small
    number words ("five", "a dozen"); the two ends of a range ("140k-165k", "from 5 to 10",
    "between 2 and 4") marked as its low and high (`range_part`)."""
    out: list[FoundNumber] = []
    for joined in _RANGE.finditer(text):  # "140k-165k": each end a number of its own
        for part, side in ((1, "low"), (2, "high")):
            match = _NUMBER.fullmatch(joined[side])
            if match is not None:
                out.append(_found(match, joined.start(side), part))
    for match in _NUMBER.finditer(text):
        if not any(a <= match.start() < b for a, b in (n.span for n in out)):
            out.append(_found(match, 0, 0))
    taken = [n.span for n in out]
    for match in _WORDS.finditer(text):
        if not any(a <= match.start() < b for a, b in taken):
            out += _said(match)
    return _ranges(text, [_priced(text, n) for n in sorted(out, key=lambda n: n.span)])


def _priced(text: str, number: FoundNumber) -> FoundNumber:
    """`number`, money where a currency's word follows it ("500 dollars", "a 2,500 dollar
    deductible", "20 eur")."""
    if number.is_money or not written_as_money(text, number.span):
        return number
    return replace(number, is_money=True)


def written_as_money(text: str, span: tuple[int, int]) -> bool:
    """Whether the number at `span` of `text` is written as money: a currency's sign at its
    start or a currency's word after it ("$1.2k", "500 dollars")."""
    after = UNIT_AFTER.match(text, span[1])
    return _SIGN.match(text, span[0]) is not None or (
        after is not None and money_word(after[1]) is not None)


def _said(match: re.Match[str]) -> list[FoundNumber]:
    """The numbers a run of number words says: one, or several where a word cannot go on
    the number before it ("one two three"); a scale alone ("grand", "thousand") is none."""
    out: list[FoundNumber] = []
    total = group = 0
    start = end = -1
    last = ""  # the kind of the number's last word

    for word in re.finditer(r"[A-Za-z]+", match[0]):
        w = word[0].lower()
        if w == "and":
            continue
        kind = _kind(w)
        if start < 0 or not _goes_on(kind, last, w):
            if start >= 0:
                out.append(FoundNumber(total + group, match.string[start:end], (start, end)))
            total = group = 0
            start = -1
            if kind == "scale":
                continue
            start = match.start() + word.start()
        if kind == "scale":
            total += (group or 1) * _SCALE_WORDS[w]
            group = 0
        elif kind == "hundred":
            group = (group or 1) * 100
        else:
            group += _NUMBER_WORDS[w]
        end, last = match.start() + word.end(), kind
    if start >= 0:
        out.append(FoundNumber(total + group, match.string[start:end], (start, end)))
    return out


def _kind(word: str) -> str:
    if word in _UNIT_WORDS or word == "dozen":
        return "unit"
    if word in _TEN_WORDS:
        return "ten"
    return "hundred" if word == "hundred" else "scale"


def _goes_on(kind: str, last: str, word: str) -> bool:
    """Whether a number word of `kind` continues a number whose last word was of kind
    `last`: "twenty-*five*", "five *hundred*", "two hundred and *fifty*", "fifteen *grand*"."""
    if kind == "unit":
        return last in ("hundred", "scale") or (last == "ten" and _NUMBER_WORDS[word] < 10)
    if kind == "ten":
        return last in ("hundred", "scale")
    return last in ("unit", "ten", "hundred")


def _found(match: re.Match[str], offset: int, range_part: int) -> FoundNumber:
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
    end = match.end() if (suffix is not None or word or match["percent"] or match["ordinal"]) \
        else match.end("digits")
    return FoundNumber(value=_whole(value), text=digits,
                       span=(offset + match.start(), offset + end),
                       is_money=match["currency"] is not None,
                       is_percent=match["percent"] is not None, range_part=range_part)


def _ranges(text: str, numbers: list[FoundNumber]) -> list[FoundNumber]:
    """`numbers` with the two ends of a range said in words marked: "from 5 to 10", "5 to 10
    units", "between 2 and 4" ("40 to Asha and 10" is none: a word stands between)."""
    out = list(numbers)
    for k in range(len(out) - 1):
        low, high = out[k], out[k + 1]
        if low.range_part or high.range_part:
            continue
        between = text[low.span[1]:high.span[0]]
        if _TO.fullmatch(between) or (_AND.fullmatch(between)
                                      and _BETWEEN.search(text[:low.span[0]])):
            out[k], out[k + 1] = replace(low, range_part=1), replace(high, range_part=2)
    return out


def _whole(value: float) -> int | float:
    """`value` as an int when whole and exactly representable (1200000.0 → 1200000)."""
    rounded = round(value, 9)
    return int(rounded) if rounded == int(rounded) and abs(rounded) < 2 ** 53 else value
