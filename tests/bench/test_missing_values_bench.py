"""`stackroute bench missing-values`: how a request loses its value, and the counts (tier a;
the smoke run is in test_bench_smoke.py)."""

from __future__ import annotations

from stackroute.bench.experiments.missing_values import stripped, summary


def test_a_value_is_cut_out_only_where_it_stands_once_as_a_whole() -> None:
    assert stripped("Book a table for 4 at Luigi's", 4) == "Book a table for at Luigi's"
    assert stripped("Weather in New York today", "new york") == "Weather in today"
    assert stripped("pay 5 and 5", 5) is None  # twice: which one is the value?
    assert stripped("order 15 items", 5) is None  # not a whole number of its own
    assert stripped("email bo@x.io", "x.io") is None  # part of another value
    assert stripped("turn it on", True) is None


def test_the_summary_counts_asks_by_kind() -> None:
    rows = [{"variant": "intact", "asked": [], "asked_absent": []},
            {"variant": "intact", "asked": ["a"], "asked_absent": ["a"]},
            {"variant": "stripped", "kind": "number", "asked": True, "written": True},
            {"variant": "stripped", "kind": "string", "asked": False, "written": False},
            {"variant": "stripped", "kind": "string", "asked": True, "written": False}]
    out = summary(rows)
    assert (out["intact_requests"], out["intact_that_asked"],
            out["intact_asked_for_a_value_not_in_the_request"]) == (2, 1, 1)
    assert (out["stripped_variants"], out["stripped_asked"]) == (3, 2)
    assert out["by_kind"]["string"] == {"variants": 2, "asked": 1, "written": 0,
                                        "misplaced": 1}
