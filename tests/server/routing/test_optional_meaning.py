"""Optional values the request gives without naming their property (`OptionalValues`,
routing/arguments/meaning.py): a request value whose embedding (the real offline MiniLM) is
most like one optional property's among the leaf's fills it; by words alone it stays out.
The model is a double: what is under test is which values are offered, not its choice."""

from __future__ import annotations

from typing import Any

import pytest
from doubles import LogitEngine, then_done
from stackroute.runtime.catalog import build_tree
from stackroute.runtime.errors import InputError
from stackroute.server.commands.common import RoutingFlags
from stackroute.server.routing.arguments.meaning import ValueMeaning, property_text
from stackroute.server.routing.options import (
    ArgumentValues,
    DraftSource,
    OptionalValues,
    RouterOptions,
)
from stackroute.server.routing.router import build_machine, default_embedder
from stackroute.server.settings import ServerSettings
from stackroute.server.tools.evaluate import Query, run_query

INSIGHTS = {"name": "r", "children": [{
    "name": "getFilmInsights", "description": "Marketing insights for a film.",
    "parameters": {"type": "object", "required": ["film_title"], "properties": {
        "film_title": {"type": "string", "description": "The title of the film"},
        "platform": {"type": "string", "description": "The social media platform"},
        "author": {"type": "string", "description": "Name of the person who wrote the review"},
        "max_results": {"type": "integer", "description": "How many insights to return"}}}}]}
FACEBOOK = 'Provide the marketing insights for the film "Avengers: Endgame" on Facebook.'


def route(request: str, values: ArgumentValues, optional: OptionalValues,
          engine: LogitEngine | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    engine = engine or LogitEngine(then_done({"getFilmInsights": 5.0}))
    options = RouterOptions(recovery=None, speculation=DraftSource.OFF, argument_values=values,
                            optional_values=optional)
    state = run_query(build_machine(build_tree(INSIGHTS), engine, options=options),
                      Query(id="q", query=request, gold=(), args=None, tags=()))
    event = next(e for e in state.trace
                 if e.kind.value == "route" and e.decision == "getFilmInsights")
    sources = {c["name"]: c["source"] for c in event.detail["value_choices"]}
    return state.calls[0]["arguments"], sources


@pytest.mark.parametrize("values", [ArgumentValues.PRIORS, ArgumentValues.MODEL])
def test_a_value_given_without_its_propertys_name_fills_it_by_meaning(
        values: ArgumentValues) -> None:
    by_words, sources = route(FACEBOOK, values, OptionalValues.WORDS)
    assert by_words == {"film_title": "Avengers: Endgame"}
    assert sources["platform"] == "unsupported"
    by_meaning, sources = route(FACEBOOK, values, OptionalValues.MEANING)
    assert by_meaning == {"film_title": "Avengers: Endgame", "platform": "Facebook"}
    assert sources["author"] == "unsupported" and sources["max_results"] == "unsupported"


def test_a_value_offered_by_meaning_is_not_offered_with_none() -> None:
    # The match is the request's support: the model chooses among the matched values only
    # (a model asked whether an unlabelled value is given says no, routing-facts.md).
    engine = LogitEngine(then_done({"getFilmInsights": 5.0, "NONE": 50.0, "Twitter": 1.0}))
    arguments, sources = route('Insights for the film "Dune" on Facebook or on Twitter.',
                               ArgumentValues.MODEL, OptionalValues.MEANING, engine)
    menus = [c.options for c in engine.calls if "Facebook" in c.options]
    assert len(menus) == 2 and "Dune" in menus[0]  # the film's title, then the platform
    assert menus[1] == ("Facebook", "Twitter")  # the matched values only, no NONE
    assert arguments["platform"] == "Twitter" and sources["platform"] == "model"


def test_a_value_is_given_only_to_the_property_it_means_best_and_clearly() -> None:
    from stackroute.server.routing.arguments.candidate import Candidate

    meaning = ValueMeaning(default_embedder)
    properties = INSIGHTS["children"][0]["parameters"]["properties"]  # type: ignore[index]
    facebook = Candidate("Facebook", "Facebook", "span", 0.0)
    assert meaning.matching("platform", properties, [facebook]) == [facebook]
    assert meaning.matching("author", properties, [facebook]) == []  # means platform more
    # like the property, but not enough (MiniLM: 0.34 for LinkedIn, below MIN_SIMILARITY)
    assert meaning.matching("platform", properties,
                            [Candidate("LinkedIn", "LinkedIn", "span", 0.0)]) == []
    # a value the candidates hold back (negative prior) is never matched
    held = Candidate("Facebook", "Facebook", "span", -1.0)
    assert meaning.matching("platform", properties, [held]) == []
    assert meaning.embedder() is default_embedder()  # loaded on first use, once


def test_nothing_in_the_request_means_the_property_so_it_stays_out() -> None:
    arguments, sources = route('Provide the marketing insights for the film "Dune".',
                               ArgumentValues.PRIORS, OptionalValues.MEANING)
    assert arguments == {"film_title": "Dune"}
    assert all(sources[n] == "unsupported" for n in ("platform", "author", "max_results"))


def test_property_text_is_its_name_in_words_with_its_description() -> None:
    assert property_text("social_platform", {}) == "social platform"
    assert property_text("patientID", {}) == "patient id"  # camelCase and acronyms too
    assert property_text("unit", {"description": "Unit of volume"}) == "unit: Unit of volume"


def test_the_setting_and_the_flag_choose_and_a_bad_value_names_the_choices(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert ServerSettings.default("optional_values") is OptionalValues.MEANING
    shipped = RouterOptions(recovery=None, speculation=DraftSource.OFF)
    assert shipped.optional_values is OptionalValues.MEANING
    assert "optional_values" not in shipped.describe()
    flags = RoutingFlags.parse(policy="plain", calibration=None, optional_values="words")
    options = flags.options_for(LogitEngine({}))
    assert options.optional_values is OptionalValues.WORDS
    assert options.describe()["optional_values"] == "words"
    monkeypatch.setenv("STACKROUTE_OPTIONAL_VALUES", "words")
    assert ServerSettings.load().router_options("fake-model").optional_values \
        is OptionalValues.WORDS
    with pytest.raises(InputError, match=r"--optional-values.*words.*meaning"):
        RoutingFlags.parse(policy="plain", calibration=None, optional_values="sometimes")


def test_a_boolean_enum_or_array_is_never_offered_by_meaning() -> None:
    # their values are settled by the request's words (polarity.py, enum words, lists.py)
    from stackroute.server.routing.arguments.candidate import Candidate
    from stackroute.server.routing.arguments.support import offered

    class MeansEverything(ValueMeaning):
        def matching(self, name: str, properties: Any, found: Any) -> list[Candidate]:
            return list(found)

    everything = MeansEverything(default_embedder)
    value = Candidate(True, "true", "boolean", 0.0)
    for schema in ({"type": "boolean"}, {"type": "string", "enum": ["a"]},
                   {"type": "array", "items": {"type": "string"}}):
        offer = offered("flag", {"flag": schema}, [value], "Make a playlist.", set(), everything)
        assert offer.candidates == []
    offer = offered("flag", {"flag": {"type": "string"}}, [value], "Make a playlist.", set(),
                    everything)
    assert offer == ([value], False)  # a string is, and without NONE


@pytest.mark.parametrize("name, schema", [
    ("start_date", {"type": "string", "description": "When the maintenance starts"}),
    ("visit_time", {"type": "string"}),
    ("due", {"type": "string", "format": "date"}),
])
def test_a_date_or_time_takes_only_a_date_or_a_time_by_meaning(
        name: str, schema: dict[str, Any]) -> None:
    # "Schedule HVAC maintenance": "HVAC" is the topic of the date, not the date
    from stackroute.server.routing.arguments.candidate import Candidate
    from stackroute.server.routing.arguments.support import offered

    class MeansEverything(ValueMeaning):
        def matching(self, name: str, properties: Any, found: Any) -> list[Candidate]:
            return list(found)

    words = Candidate("HVAC", "HVAC", "span", 1.5, (9, 13))
    day = Candidate("2024-05-03", "2024-05-03", "date", 1.0)
    clock = Candidate("10:30", "10:30", "time", 2.0, (30, 35))
    offer = offered(name, {name: schema}, [words, day, clock],
                    "Schedule HVAC maintenance at 10:30 on May 3, 2024.", set(),
                    MeansEverything(default_embedder))
    assert offer == ([day, clock], False)
