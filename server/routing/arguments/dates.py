"""Dates and times a request holds, normalised to a JSON schema's `format` (or a `pattern`).

>>> [d.iso for d in find_dates("from November 25, 2013, to 7 Jan 2006 and 2024-03-05")]
['2013-11-25', '2006-01-07', '2024-03-05']
>>> [t.iso for t in find_times("at 13:31 and 9am, or 3:45 pm")]
['13:31', '09:00', '15:45']
>>> [(t.iso, t.range_part) for t in find_times("open 1-4pm")]
[('13:00', 1), ('16:00', 2)]
"""

from __future__ import annotations

import calendar
import datetime
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from stackroute.server.routing.arguments.zones import zone_after

_MONTHS = {name: n for n, names in enumerate(
    [("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"), ("may",),
     ("june", "jun"), ("july", "jul"), ("august", "aug"), ("september", "sep", "sept"),
     ("october", "oct"), ("november", "nov"), ("december", "dec")], 1) for name in names}
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>\d{4})"
_DATE_PATTERNS = [
    re.compile(r"\b(?P<year>\d{4})-(?P<mnum>\d{1,2})-(?P<day>\d{1,2})\b"),
    re.compile(r"\b(?P<year>\d{4})/(?P<mnum>\d{1,2})/(?P<day>\d{1,2})\b"),
    re.compile(r"\b(?P<mnum>\d{1,2})/(?P<day>\d{1,2})/(?P<year>\d{4})\b"),  # US order
    re.compile(r"\b(?P<mnum>\d{1,2})/(?P<day>\d{1,2})/(?P<yy>\d{2})\b(?!/)"),  # "2/9/27"
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),  # a month: day left out
    re.compile(rf"\b{_MONTH}\s+{_DAY}\b(?!\s*,?\s*\d)", re.IGNORECASE),  # no year
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}\b(?!,?\s*\d)", re.IGNORECASE),
]
# A day said alone ("coming back on the 7th"), not a count of something ("the 7th floor")
_DAY_ALONE = re.compile(r"\bthe\s+(?P<day>[0-3]?\d)(?:st|nd|rd|th)\b(?!\s*(?:of\s+)?[A-Za-z\d])",
                        re.IGNORECASE)
# Between the two ends of a range: "March 3rd *and* March 10th 2027", "Dec 28 *to* Jan 3 2027"
_RANGE_JOIN = re.compile(r",?\s*(?:-|–|—|to|and|through|thru|until|till)\s*", re.IGNORECASE)
_TIME = re.compile(r"\b(?P<hour>[01]?\d|2[0-3])(?::(?P<minute>[0-5]\d))?(?::(?P<second>[0-5]\d))?"
                   r"\s*(?P<half>am|pm|a\.m\.|p\.m\.)?(?![\w:])", re.IGNORECASE)
# Between the two ends of a time range ("9:30 *to* 11am", "1*-*4pm"); "and" only after
# "between" ("between 1pm and 4pm"; "at 9am and 4pm" is two times)
_TIME_JOIN = re.compile(r"\s*(?:-|–|—|to|until|till|through|thru)\s*", re.IGNORECASE)
_AND = re.compile(r"\s+and\s+", re.IGNORECASE)
# between a date and its time (and the time's zone): "08:45 UTC on 14 March 2027",
# "2027-03-14 at 9:30pm"
_AT = re.compile(r"(?:\s|,|\bat\b|\bon\b|\bthe\s+(?:morning|afternoon|evening|night)\s+of\b)*",
                 re.IGNORECASE)
_BETWEEN = re.compile(r"\bbetween\s+$", re.IGNORECASE)
# an hour said bare before a range's end that gives the half ("*1*-4pm", "between *11* and 1pm")
_BARE_START = re.compile(r"(?<![\w:.])(?P<hour>[01]?\d)(?::(?P<minute>[0-5]\d))?"
                         r"(?P<join>\s*(?:-|–|—|to|until|till|through|thru)\s*|\s+and\s+)$",
                         re.IGNORECASE)


@dataclass(frozen=True)
class FoundDate:
    year: int | None
    month: int
    day: int | None  # None: the request named a month only
    text: str
    span: tuple[int, int]

    @property
    def iso(self) -> str:
        """YYYY-MM-DD (YYYY-MM for a month, --MM-DD without a year)."""
        year = f"{self.year:04d}" if self.year is not None else "-"
        return f"{year}-{self.month:02d}" + (f"-{self.day:02d}" if self.day is not None else "")


@dataclass(frozen=True)
class FoundTime:
    hour: int
    minute: int
    second: int | None
    text: str
    span: tuple[int, int]
    range_part: int = 0  # 1: the start of a range ("1pm" of "1pm-4pm"), 2: its end
    half: str = ""  # "am" or "pm" where the request says which

    @property
    def iso(self) -> str:
        seconds = f":{self.second:02d}" if self.second is not None else ""
        return f"{self.hour:02d}:{self.minute:02d}{seconds}"


def find_dates(text: str) -> list[FoundDate]:
    out: list[FoundDate] = []
    for pattern in _DATE_PATTERNS:
        for match in pattern.finditer(text):
            if any(_overlaps(match.span(), d.span) for d in out):
                continue
            groups = match.groupdict()
            month = int(groups["mnum"]) if groups.get("mnum") else \
                _MONTHS[groups["month"].lower().rstrip(".")]
            day = int(groups["day"]) if groups.get("day") else None
            if not 1 <= month <= 12 or (day is not None and not 1 <= day <= 31):
                continue
            year = int(groups["year"]) if groups.get("year") else \
                2000 + int(groups["yy"]) if groups.get("yy") else None
            out.append(FoundDate(year, month, day, match[0], match.span()))
    return _days_alone(_ranges_share_years(sorted(out, key=lambda d: d.span), text), text)


def _days_alone(dates: list[FoundDate], text: str) -> list[FoundDate]:
    """`dates` and each day said alone after one of them ("on March 3rd 2027, back on the
    7th"): a day of the month of the date before it, or of the next month where the day
    number is smaller; without a date before it, no date."""
    out = list(dates)
    for match in _DAY_ALONE.finditer(text):
        before = [d for d in out if d.span[1] <= match.start() and d.day is not None]
        day = int(match["day"])
        if not before or not 1 <= day <= 31 or any(_overlaps(match.span(), d.span) for d in out):
            continue
        last = before[-1]
        month, year = last.month, last.year
        if day < (last.day or 0):  # the next month's ("Jan 30 ... the 2nd": February)
            if year is not None and month == 12:
                year += 1
            month = month % 12 + 1
        out.append(FoundDate(year, month, day, match[0], match.span()))
    return sorted(out, key=lambda d: d.span)


def _ranges_share_years(dates: list[FoundDate], text: str) -> list[FoundDate]:
    """`dates` with the year one end of a range gives written into the other end that gives
    none ("from July 2nd to July 6th 2027": both 2027; "from Dec 28 to Jan 3 2027": the
    start a year before the end, which comes first in the calendar)."""
    out = list(dates)
    for k in range(len(out) - 1):
        a, b = out[k], out[k + 1]
        if (a.year is None) == (b.year is None) or a.day is None or b.day is None \
                or not _RANGE_JOIN.fullmatch(text[a.span[1]:b.span[0]]):
            continue
        if b.year is not None:
            out[k] = replace(a, year=b.year - (1 if a.month > b.month else 0))
        elif a.year is not None:
            out[k + 1] = replace(b, year=a.year + (1 if b.month < a.month else 0))
    return out


def find_times(text: str) -> list[FoundTime]:
    """Clock times: "13:31", "9am", "3:45 pm" (a bare number is not a time, but the start of
    a range whose end says its half is: "1-4pm"), a range's ends marked (`range_part`)."""
    out: list[FoundTime] = []
    for match in _TIME.finditer(text):
        half = (match["half"] or "").lower().replace(".", "")
        if match["minute"] is None and not half:
            continue
        hour = int(match["hour"])
        if half and not 1 <= hour <= 12:
            continue
        if half == "pm" and hour != 12:
            hour += 12
        elif half == "am" and hour == 12:
            hour = 0
        second = int(match["second"]) if match["second"] else None
        out.append(FoundTime(hour, int(match["minute"] or 0), second, match[0].strip(),
                             match.span(), half=half))
    return _time_ranges(text, out)


def _time_ranges(text: str, times: list[FoundTime]) -> list[FoundTime]:
    """`times` with each range's two ends marked, its start added where the request says it
    as a bare hour before an end with a half: the end's half ("1-4pm": 13:00), or the other
    where that would start after the end ("11-1pm": 11:00)."""
    out = list(times)
    for end in times:
        bare = _BARE_START.search(text, 0, end.span[0]) if end.half else None
        if bare is None or any(t.span[1] > bare.start() and t.span[0] < end.span[0]
                               for t in out if t is not end) \
                or (_AND.fullmatch(bare["join"]) and not _BETWEEN.search(text[:bare.start()])):
            continue
        hour = int(bare["hour"]) % 12 + (12 if end.half == "pm" else 0)
        minute = int(bare["minute"] or 0)
        if (hour, minute) > (end.hour, end.minute):
            hour -= 12 if hour >= 12 else -12
        span = (bare.start(), bare.start("join"))
        out.append(FoundTime(hour % 24, minute, None, text[span[0]:span[1]], span))
    out.sort(key=lambda t: t.span)
    for k in range(len(out) - 1):
        start, end = out[k], out[k + 1]
        between = text[start.span[1]:end.span[0]]
        if _TIME_JOIN.fullmatch(between) or (_AND.fullmatch(between)
                                             and _BETWEEN.search(text[:start.span[0]])):
            out[k], out[k + 1] = replace(start, range_part=1), replace(end, range_part=2)
    return out


def date_forms(found: FoundDate, *, schema_format: str | None,
               at: tuple[FoundTime, str] | None = None, end: int = 0) -> list[str]:
    """How `found` may be written for a property: the schema's format first; a date-time at
    the time the request gives the date (`at`: the time, and the RFC 3339 offset of the zone
    the request names, "" where it names none), else at midnight. A month said alone is its
    first day for a date that starts a range, its last for one that ends it (`end` 1 or 2:
    "the November 2026 invoice" for `period_start`, `period_end`), else YYYY-MM.

    >>> [d] = find_dates("the November 2026 invoice")
    >>> [date_forms(d, schema_format="date", end=e) for e in (1, 2, 0)]
    [['2026-11-01'], ['2026-11-30'], ['2026-11']]
    """
    if found.year is None:
        return [found.text]
    if found.day is None:
        if schema_format == "date" and end:
            day = 1 if end == 1 else calendar.monthrange(found.year, found.month)[1]
            return [f"{found.iso}-{day:02d}"]
        return [found.iso]  # YYYY-MM
    if schema_format == "date-time":
        if at is None:
            return [f"{found.iso}T00:00:00"]
        time, offset = at
        return [f"{found.iso}T{time.hour:02d}:{time.minute:02d}:{time.second or 0:02d}{offset}"]
    return [found.iso]


def time_of(found: FoundDate, times: Sequence[FoundTime], text: str, *,
            only: bool = False) -> tuple[FoundTime, str] | None:
    """The time the request gives date `found` ("08:45 UTC on 14 March 2027", "on 2027-03-14
    at 9:30pm": only "at", "on", a comma, "the morning of" or the time's zone between; or
    anywhere, where it is the request's only time and `found` its `only` date), and the offset
    of the zone it names after the time ("Z", "-05:00" for "EST" or for "Eastern" on a
    winter's date; "" where it names none).

    >>> [d] = find_dates(text := "at 9:00 a.m. Eastern on 3 June 2027")
    >>> time, offset = time_of(d, find_times(text), text)
    >>> time.iso, offset
    ('09:00', '-04:00')
    """
    for time in times:
        zone = zone_after(text, time.span[1])
        if time.span < found.span:
            between = text[zone.end if zone else time.span[1]:found.span[0]]
        else:
            between = text[found.span[1]:time.span[0]]
        if _AT.fullmatch(between) or (only and len(times) == 1 and not time.range_part):
            offset = zone.offset(_calendar_date(found), datetime.time(time.hour, time.minute)) \
                if zone else None
            return time, offset or ""
    return None


def _calendar_date(found: FoundDate) -> datetime.date | None:
    try:
        return datetime.date(found.year or 0, found.month, found.day or 0)
    except ValueError:  # no year, no day, or none such ("February 30")
        return None


def time_forms(found: FoundTime, *, schema_format: str | None) -> list[str]:
    if schema_format == "time":
        return [f"{found.hour:02d}:{found.minute:02d}:{found.second or 0:02d}"]
    return [found.iso]


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]
