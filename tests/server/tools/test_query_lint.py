"""`lint --queries`: the confusion report on a scripted engine (tier b: the real prompt
layout and menus from `build_machine`, a script for the model)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from doubles import RequestScriptEngine
from stackroute.runtime.catalog import build_tree
from stackroute.server.engines.base import ContextOverflowError
from stackroute.server.tools.query_lint import query_confusion
from taxonomy_kit import leaf, router

TREE = build_tree(router(
    "root", "",
    router("finance", "Money", router("banking", "Banks", leaf("pay", "Pay a bill"),
                                      leaf("transfer", "Move money")),
           leaf("budget", "Plan a budget")),
    router("travel", "Trips", leaf("book_flight", "Book a flight"),
           leaf("book_hotel", "Book a hotel")),
    router("weather", "Forecasts", leaf("forecast", "Weather forecast"),
           leaf("alerts", "Storm alerts")),
))


@dataclass(frozen=True)
class Q:
    id: str
    query: str
    gold: tuple[str, ...]


# request -> the choice at each menu, keyed by the menu's first option
SCRIPT = {
    "pay my bill": {"finance": "finance", "banking": "banking", "pay": "pay"},
    "fly to Rome": {"finance": "finance", "banking": "BACK"},  # wrong at the root
    "a hotel in Rome": {"finance": "travel", "book_flight": "book_flight"},  # wrong at level 1
    "hotel and weather": {"finance": "weather", "forecast": "forecast"},  # 2nd gold: right
    "sing me a song": {"finance": "DONE"},  # nothing applies: right
    "rain tomorrow?": {"finance": "finance", "banking": "budget"},  # wrong at the root
}


def script(request: str, options: tuple[str, ...]) -> str:
    if request == "too long":
        raise ContextOverflowError("prompt needs 9000 tokens; the model's context holds 8192")
    return SCRIPT[request][options[0]]


QUERIES = [
    Q("q1", "pay my bill", ("finance/banking/pay",)),
    Q("q2", "fly to Rome", ("travel/book_flight",)),
    Q("q3", "a hotel in Rome", ("travel/book_hotel",)),
    Q("q4", "hotel and weather", ("travel/book_hotel", "weather/forecast")),
    Q("q5", "sing me a song", ()),
    Q("q6", "rain tomorrow?", ("weather/forecast",)),
    Q("q7", "not in this tree", ("shopping/cart",)),
    Q("q8", "too long", ("weather/alerts",)),
]


def test_confusion_report() -> None:
    report = query_confusion(TREE, RequestScriptEngine(script), QUERIES)
    assert report.skipped == ["q7"]
    assert [(r.id, r.chosen_path, r.first_wrong_level, r.is_correct) for r in report.routes] == [
        ("q1", "finance/banking/pay", None, True),
        ("q2", "finance/BACK", 0, False),
        ("q3", "travel/book_flight", 1, False),
        ("q4", "weather/forecast", None, True),
        ("q5", "DONE", None, True),
        ("q6", "finance/budget", 0, False),
        ("q8", "", 0, False),
    ]
    assert report.confusion() == {
        "DONE": {"DONE": 1}, "finance": {"finance": 1},
        "travel": {"finance": 1, "travel": 1},
        "weather": {"<error>": 1, "finance": 1, "weather": 1},
    }
    assert report.domains() == {
        "DONE": {"queries": 1, "top_level_accuracy": 1.0, "leaf_accuracy": 1.0},
        "finance": {"queries": 1, "top_level_accuracy": 1.0, "leaf_accuracy": 1.0},
        "travel": {"queries": 2, "top_level_accuracy": 0.5, "leaf_accuracy": 0.0},
        "weather": {"queries": 3, "top_level_accuracy": 0.3333, "leaf_accuracy": 0.3333},
    }
    assert report.wrong_by_level() == {0: 3, 1: 1}
    assert report.most_confused(2) == [("travel", "finance", 1), ("weather", "finance", 1)]
    summary = report.summary()
    assert (summary["num_queries"], summary["num_skipped"], summary["num_errors"]) == (7, 1, 1)
    assert summary["leaf_accuracy"] == round(3 / 7, 4)
    assert summary["model_calls_mean"] == round(12 / 7, 2)  # 3+2+2+2+1+2+0 calls

    d = json.loads(json.dumps(report.to_dict()))
    q3 = next(w for w in d["wrong"] if w["id"] == "q3")
    assert q3["wrong_at"] == {"node": "travel", "choice": "book_flight",
                              "expected": ["book_hotel"], "probability": 0.7,
                              "gold_probability": 0.15}
    assert next(w for w in d["wrong"] if w["id"] == "q8")["error"].startswith(
        "ContextOverflowError")


def test_render_text_and_limit() -> None:
    report = query_confusion(TREE, RequestScriptEngine(script), QUERIES, limit=3)
    assert [r.id for r in report.routes] == ["q1", "q2", "q3"]
    text = report.render_text()
    assert text.splitlines()[0].startswith("3 queries routed (0 skipped")
    assert "first wrong decision at: level 0: 1, level 1: 1" in text
    assert "  travel -> finance: 1" in text
    assert "level 1 at travel: chose book_flight (p=0.70), gold book_hotel (p=0.15)" in text
