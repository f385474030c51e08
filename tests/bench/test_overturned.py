"""Guided routing against its own evidence: which decisions it overturned, and who was right."""

from __future__ import annotations

from stackroute.bench.experiments.overturned import overturned


def test_only_decisions_that_differ_from_the_evidence_are_listed_with_who_was_right() -> None:
    rows = overturned([
        ("fixed", ("a/x",), ("a/y",), ("a/y",)),  # the router was right, the evidence wrong
        ("kept", ("a/x",), ("a/x",), ("a/x",)),
        ("broke", ("a/x",), ("b/z",), ("a/x",)),  # the evidence was right
        ("both-wrong", ("a/x",), ("b/z",), ("c/w",)),
        ("declined", (), ("a/x",), ()),  # the evidence below its out-of-scope score
    ])
    assert rows.num_queries == 5
    assert [d.query_id for d in rows.decisions] == ["fixed", "broke", "both-wrong", "declined"]
    assert (rows.num_overturned, rows.num_right, rows.num_wrong) == (4, 1, 2)
    listed = rows.to_dict()
    assert listed["decisions"][3] == {"id": "declined", "evidence": [], "router": ["a/x"],
                                      "gold": [], "router_right": False,
                                      "evidence_right": True}
