"""Coordinates a request writes as a pair, for a property of a latitude or a longitude.

A pair is two decimal numbers with a comma between, in the ranges of a latitude and a
longitude ("33.0198, -96.6989"), or with their hemispheres ("40.7128° N, 74.0060° W": south
and west are negative). The first is the latitude, the second the longitude; a property named
for one (`center_lat`, `latitude`, `lng`) takes that number as a value only its kind takes.

>>> [(p.latitude, p.longitude) for p in find_pairs("around 33.0198, -96.6989 and 40.71°N, 74.01°W")]
[(33.0198, -96.6989), (40.71, -74.01)]
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import NamedTuple

from stackroute.server.routing.arguments.candidate import Candidate

_NUMBER = r"(-?\d{1,3}\.\d+)\s*°?\s*([NSEWnsew])?"
_PAIR = re.compile(rf"(?<![\w.-]){_NUMBER}\s*,\s*{_NUMBER}(?![\w.])")
_LATITUDE_WORDS = frozenset(("lat", "latitude"))
_LONGITUDE_WORDS = frozenset(("lon", "lng", "long", "longitude"))


class Pair(NamedTuple):
    latitude: float
    longitude: float
    spans: tuple[tuple[int, int], tuple[int, int]]


def find_pairs(text: str) -> list[Pair]:
    """Every latitude-longitude pair `text` writes, in order."""
    out = []
    for m in _PAIR.finditer(text):
        lat = _signed(float(m[1]), m[2], "S")
        lon = _signed(float(m[3]), m[4], "W")
        hemispheres = ((m[2] or "N").upper() in "NS", (m[4] or "E").upper() in "EW")
        if abs(lat) <= 90 and abs(lon) <= 180 and all(hemispheres):
            out.append(Pair(lat, lon, (m.span(1), m.span(3))))
    return out


def coordinate_candidates(words: Collection[str], text: str, *,
                          prior: float) -> list[Candidate]:
    """The latitudes (for a property named for one) or longitudes the request writes in
    pairs, at `prior`; none for any other property."""
    held = set(words)
    side = 0 if held & _LATITUDE_WORDS else 1 if held & _LONGITUDE_WORDS else None
    if side is None:
        return []
    return [Candidate(value, repr(value), "coordinate", prior, pair.spans[side])
            for pair in find_pairs(text) for value in (pair[side],)]


def _signed(value: float, hemisphere: str | None, negative: str) -> float:
    return -abs(value) if hemisphere is not None and hemisphere.upper() == negative else value
