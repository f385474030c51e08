"""Time zones a request names after a clock time, as the offset RFC 3339 writes.

A zone is named by an abbreviation that fixes its offset ("EST", "CEST", "UTC+05:30"), or by
a region's zone that keeps summer time ("ET", "Eastern", "Pacific time"), whose offset the
date says (`zoneinfo`: 9:00 Eastern is -04:00 on 3 June, -05:00 on 3 December). A word is a
zone only where a time stands before it and no noun after it ("9am central office", "9am MT
Everest", "9am est. cost" are none). A region's zone without a date says no offset.

>>> zone_after("9:00 a.m. Eastern", 9).offset(datetime.date(2027, 6, 3))
'-04:00'
>>> zone_after("07:00 EST, roughly 3 hours", 5).offset(None)
'-05:00'
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from stackroute.server.routing.arguments.cues import STOPWORDS

# minutes east of UTC, for abbreviations that fix them (no "IST": India's or Ireland's)
_FIXED = {"utc": 0, "gmt": 0, "z": 0, "zulu": 0, "est": -300, "edt": -240, "cst": -360,
          "cdt": -300, "mst": -420, "mdt": -360, "pst": -480, "pdt": -420, "akst": -540,
          "akdt": -480, "hst": -600, "cet": 60, "cest": 120, "bst": 60, "wet": 0, "west": 60,
          "eet": 120, "eest": 180, "msk": 180, "jst": 540, "kst": 540, "sgt": 480,
          "aest": 600, "aedt": 660, "nzst": 720, "nzdt": 780}
# regions' zones that keep summer time, by their short or long names
_REGIONS = {"et": "America/New_York", "eastern": "America/New_York",
            "ct": "America/Chicago", "central": "America/Chicago",
            "mt": "America/Denver", "mountain": "America/Denver",
            "pt": "America/Los_Angeles", "pacific": "America/Los_Angeles",
            "alaska": "America/Anchorage", "hawaii": "Pacific/Honolulu"}
_STANDARD, _DAYLIGHT = datetime.date(2027, 1, 15), datetime.date(2027, 7, 15)
_SHORT = frozenset(("z", "et", "ct", "mt", "pt"))  # written in capitals only ("pt" is a part)
_ZONE = re.compile(
    r"\s*\(?(?P<name>[A-Za-z]{1,5}|eastern|central|mountain|pacific|alaska|hawaii)\b"
    r"(?:(?P<shift>[+-]\d{1,2}(?::?\d{2})?)\b)?"
    r"(?:\s+(?:(?P<season>standard|daylight)\s+)?time\b)?\)?", re.IGNORECASE)
_NEXT_WORD = re.compile(r"(?P<dot>\.\s+)?\s*(?P<word>[A-Za-z]+)")
# words after a zone that name a day, not a noun the zone's word would qualify
_DAY_WORDS = frozenset(("today", "tomorrow", "tonight", "yesterday", "monday", "tuesday",
                        "wednesday", "thursday", "friday", "saturday", "sunday", "mon", "tue",
                        "wed", "thu", "fri", "sat", "sun", "sharp"))


@dataclass(frozen=True)
class Zone:
    end: int  # where in the request the zone's words end
    minutes: int | None = None  # a fixed offset, east of UTC
    region: str | None = None  # an IANA zone that keeps summer time

    def offset(self, date: datetime.date | None, time: datetime.time | None = None) -> str | None:
        """The RFC 3339 offset ("Z", "-05:00") at local `date` and `time`; None for a
        region's zone without a date."""
        minutes = self.minutes
        if self.region is not None:
            if date is None:
                return None
            local = datetime.datetime.combine(date, time or datetime.time(12),
                                              tzinfo=ZoneInfo(self.region))
            shift = local.utcoffset()
            minutes = int(shift.total_seconds() // 60) if shift is not None else None
        if minutes is None:
            return None
        if minutes == 0 and self.region is None:
            return "Z"  # UTC's, as RFC 3339 writes it
        sign = "+" if minutes >= 0 else "-"
        return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def zone_after(text: str, pos: int) -> Zone | None:
    """The time zone `text` names at `pos` (just after a clock time), or None."""
    match = _ZONE.match(text, pos)
    if match is None:
        return None
    name = match["name"]
    key = name.lower()
    if (key in _SHORT and not name.isupper()) or (key not in _FIXED and key not in _REGIONS):
        return None
    if _noun_after(text, match.end(), capitals=name.isupper()):
        return None
    if key in _REGIONS:
        if match["shift"]:
            return None
        zone = Zone(match.end(), region=_REGIONS[key])
        season = (match["season"] or "").lower()
        if season:  # "Pacific Standard Time": the offset of that season, whatever the date
            offset = zone.offset(_STANDARD if season == "standard" else _DAYLIGHT)
            return Zone(match.end(), minutes=_shift(offset)) if offset else None
        return zone
    minutes = _FIXED[key]
    if match["shift"]:
        if minutes != 0:
            return None  # "EST+2" says no offset of its own
        minutes = _shift(match["shift"])
    return Zone(match.end(), minutes=minutes)


def _noun_after(text: str, end: int, *, capitals: bool) -> bool:
    """Whether a word the zone's word would qualify follows it ("central office"), or an
    abbreviation's period does ("est. cost"; not "EST. put it in", a sentence's end)."""
    after = _NEXT_WORD.match(text, end)
    if after is None:
        return False
    word = after["word"]
    if after["dot"]:
        return word[0].islower() and not capitals
    return word.lower() not in STOPWORDS and word.lower() not in _DAY_WORDS


def _shift(written: str) -> int:
    """Minutes east of UTC in "+5", "-05:00", "+0530"."""
    sign = -1 if written[0] == "-" else 1
    digits = written[1:].replace(":", "")
    hours, minutes = (digits, "0") if len(digits) <= 2 else (digits[:-2], digits[-2:])
    return sign * (int(hours) * 60 + int(minutes))
