"""Coordinates written as a pair (routing/arguments/coordinates.py): a held-out fleet desk's
geofence "250 m radius around 33.0198, -96.6989" took `address` "VH-0101" (its anyOf's first
alternative) and left `center_lat`/`center_lon` out: unlabelled numbers."""

from __future__ import annotations

import pytest
from stackroute.runtime.tree import Node
from stackroute.server.routing.arguments.candidates import candidates
from stackroute.server.routing.arguments.menus import ValueMenus

GEOFENCE = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "address": {"type": "string"},
                   "center_lat": {"type": "number", "minimum": -90, "maximum": 90},
                   "center_lon": {"type": "number", "minimum": -180, "maximum": 180},
                   "radius_m": {"type": "number", "minimum": 25}},
    "required": ["name", "radius_m"],
    "anyOf": [{"required": ["address"]}, {"required": ["center_lat", "center_lon"]}],
}
REQUEST = ('Create a geofence named "Plano Yard": 250 m radius around 33.0198, -96.6989, '
           "alert on exit only, for VH-0101 and VH-0102.")


@pytest.mark.parametrize(("name", "request_text", "value"), [
    ("center_lat", REQUEST, 33.0198),
    ("center_lon", REQUEST, -96.6989),
    ("latitude", "the pin is at 40.7128° N, 74.0060° W", 40.7128),
    ("lng", "the pin is at 40.7128° N, 74.0060° W", -74.006),
])
def test_a_pair_gives_its_latitude_and_its_longitude(name: str, request_text: str,
                                                     value: float) -> None:
    found = candidates(name, {"type": "number"}, request_text)
    assert found[0].value == value and found[0].kind == "coordinate"


@pytest.mark.parametrize("request_text", ["scores of 95.5, 120.25 today", "1.5, 2.5"])
def test_numbers_that_are_no_coordinates_are_none(request_text: str) -> None:
    # a longitude past 180 is none; "1.5, 2.5" would be a pair, but no property here is a
    # latitude
    assert not any(c.kind == "coordinate"
                   for c in candidates("score", {"type": "number"}, request_text))
    if "95.5" in request_text:
        assert not any(c.kind == "coordinate"
                       for c in candidates("lat", {"type": "number"}, request_text))


def test_the_alternative_the_request_holds_surest_is_required() -> None:
    leaf = Node("set_geofence", ("telematics",), "Create a geofence.", parameters=GEOFENCE)
    assert ValueMenus.read(leaf, REQUEST).required == ("name", "radius_m", "center_lat",
                                                       "center_lon")
    said = "Create a geofence named Yard, 250 m radius around 2200 Commerce St"
    assert ValueMenus.read(leaf, said).required == ("name", "radius_m", "address")
