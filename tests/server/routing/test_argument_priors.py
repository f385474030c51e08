"""Value candidates' priors (routing/arguments/candidates.py), the fixes found on Seal-Tools
dev misses at the gold leaf (issue 25): a value labelled with a sibling property's name, the
request's opening verb, a possessive, an unclosed quoted sentence, a place after its
preposition, a year inside a date. Each case names the request it came from."""

from __future__ import annotations

from typing import Any

import pytest
from stackroute.server.routing.arguments.candidates import LITERAL_PRIOR, candidates, topic_words
from stackroute.server.routing.arguments.request_text import RequestText
from stackroute.server.routing.arguments.sibling_labels import SIBLING_PENALTY
from stackroute.server.routing.arguments.spans import OPENING_PENALTY

POST = 'Tell me the engagement metrics for the Facebook post with the ID "rOBhSVKGVKe.'


def texts(name: str, request: str, n: int, schema: dict[str, Any] | None = None,
          siblings: tuple[str, ...] = ()) -> list[str]:
    return [c.text for c in candidates(name, schema or {"type": "string"}, request,
                                       siblings=siblings)[:n]]


def test_a_value_labelled_with_a_siblings_name_is_held_back() -> None:
    # dev-easy-1: the model gave `platform` the post's ID (the quoted value led every menu)
    assert texts("platform", POST, 1) == ["rOBhSVKGVKe"]  # alone, the quote leads
    assert texts("platform", POST, 1, siblings=("post_id",)) == ["Facebook"]
    assert texts("post_id", POST, 1, siblings=("platform",)) == ["rOBhSVKGVKe"]
    alone = {c.text: c.prior for c in candidates("platform", {"type": "string"}, POST)}
    held = {c.text: c.prior for c in candidates("platform", {"type": "string"}, POST,
                                                siblings=("post_id",))}
    assert alone["rOBhSVKGVKe"] - held["rOBhSVKGVKe"] == pytest.approx(SIBLING_PENALTY)
    assert alone["Facebook"] == held["Facebook"]


def test_a_label_does_not_reach_into_the_next_sentence() -> None:
    # a held-out HR desk: "make it roth. E-83310" held the employee's id back as the `roth`
    # flag's value, so the id was asked for
    request = "can u up my 401k to 8%? make it roth. E-83310"
    found = candidates("employee_id", {"type": "string", "pattern": "^E-[0-9]{5}$"}, request,
                       siblings=("contribution_percent", "roth"))
    assert [c.text for c in found] == ["E-83310"] and found[0].prior > 0
    # a label's own abbreviation is no sentence end: "ID no. 5"
    found = candidates("record_id", {"type": "integer"}, "Open the record no. 5 today")
    assert found[0].value == 5 and found[0].prior >= 2.0


def test_a_span_holding_a_siblings_name_is_that_values_label_not_a_value() -> None:
    # dev, stripped (bench missing-values): with its environment cut out, the request's
    # "version" (the label of the version that follows) became the environment
    request = "Please deploy the application with the app ID 'snsSB8iOmk', using version 2."
    found = {c.text: c.prior for c in candidates("environment", {"type": "string"}, request,
                                                 siblings=("app_id", "version"))}
    alone = {c.text: c.prior for c in candidates("environment", {"type": "string"}, request)}
    assert alone["version"] - found["version"] == pytest.approx(SIBLING_PENALTY)
    assert found["version"] < 0 and found["application"] == alone["application"]
    # the value beside its own label is not held back; the span holding the other label is
    request = "Send a direct mail with the subject Weekly and the message Hello."
    found = {c.text: c.prior for c in candidates("subject", {"type": "string"}, request,
                                                 siblings=("message",))}
    alone = {c.text: c.prior for c in candidates("subject", {"type": "string"}, request)}
    assert found["Weekly"] == alone["Weekly"] == max(found.values())
    assert alone["message"] - found["message"] == pytest.approx(SIBLING_PENALTY)


@pytest.mark.parametrize("quote", ['""', "''", "“”"])
def test_an_empty_quote_holds_no_value_and_pairs_with_no_other_quote(quote: str) -> None:
    # dev, stripped: 'the injury type "" in the sport "cC2xtc0o"' paired the empty quote's
    # closing mark with the next opening one and offered "in the sport" as a quoted value
    request = f'Give the guidelines for the injury type {quote} in the sport "cC2xtc0o".'
    found = candidates("injury_type", {"type": "string"}, request, siblings=("sport",))
    assert [c.text for c in found if c.kind == "quoted"] == ["cC2xtc0o"]
    assert "in the sport" not in [c.text for c in found]


def test_plain_words_are_not_an_id_but_a_code_may_be_one() -> None:
    # dev, stripped: with the ID cut out, "game" of "the game server" became `server_id`
    request = "Please start the game server with ID ."
    assert all(c.prior < 0 for c in candidates("server_id", {"type": "string"}, request))
    found = candidates("server_id", {"type": "string"},
                       'Please start the game server with ID "gs-eu-7".')
    assert found[0].text == "gs-eu-7"
    assert all(c.prior < 0 for c in candidates(
        "flight_number", {"type": "string"}, "Show the flight control status of my flight."))
    # a language code is a plain word, and a right one
    found = candidates("language_code", {"type": "string"}, "Translate it, language code en.")
    assert found[0].text == "en" and found[0].prior > 0


@pytest.mark.parametrize(("name", "request_text", "word"), [
    ("exercise_name", "Tell me the details of the exercise called .", "called"),  # dev
    ("image", "Extract the text from the image at the URL using OCR.", "URL"),
    ("server", "Deploy the application file to the server at IP address .", "IP"),
])
def test_naming_words_and_kinds_of_literal_are_not_values(name: str, request_text: str,
                                                          word: str) -> None:
    # "called" says a name follows; "URL" and "IP" say a literal follows: with the value
    # left out of the request (dev, stripped), neither is one
    found = {c.text: c.prior for c in candidates(name, {"type": "string"}, request_text)}
    assert found[word] < 0
    if name == "exercise_name":  # nothing else there: the value is asked for
        assert max(found.values()) < 0


def test_a_shared_word_does_not_hold_back_a_siblings_value() -> None:
    # start_date and end_date share "date": neither's cue is the other's alone; "start" is
    # start_date's own, so "the start date 2024-03-05" is held back for end_date (dates carry
    # their place in the request since f6becbb)
    date = {"type": "string", "format": "date"}
    found = candidates("end_date", date, "Book from the date 2024-03-05",
                       siblings=("start_date",))
    assert [c.value for c in found] == ["2024-03-05"]
    assert found[0].prior == 3.0
    held = candidates("end_date", date, "Book from the start date 2024-03-05",
                      siblings=("start_date",))
    assert held[0].prior < 3.0


def test_spans_from_the_opening_verb_rank_low() -> None:
    # dev-easy-0: "Retrieve information about the number" was chosen as the location
    request = "Retrieve information about the number of nurses in a specific country."
    found = candidates("location", {"type": "string"}, request)
    opening = [c for c in found if c.text.startswith("Retrieve")]
    assert opening and all(c.prior <= -OPENING_PENALTY for c in opening)
    assert not any(t.startswith("Retrieve") for t in texts("location", request, 8))


def test_a_possessive_name_is_offered_without_its_s() -> None:
    # dev-easy-188 (John Smith), dev-easy-166 (Generosity Inc.)
    assert "John Smith" in texts("person_name", "Tell me John Smith's personality traits.", 3)
    found = texts("organization", "Assess the impact of Generosity Inc.'s activities", 48)
    assert "Generosity Inc." in found
    assert "Generosity Inc.'s" not in found


@pytest.mark.parametrize(("request_text", "expected"), [
    # dev-easy-2 / dev-easy-167: the closing quote is missing, the period is the sentence's
    ('send the message "Don\'t forget to feed the cat.', "Don't forget to feed the cat."),
    ('Check the grammar of the sentence: "The quick brown fox jumps over the lazy dog.',
     "The quick brown fox jumps over the lazy dog."),
    # closed quotes and single-word ids lose a final period
    ('send the message "Call me back." now', "Call me back"),
    (POST, "rOBhSVKGVKe"),
])
def test_a_quoted_sentence_keeps_its_period_only_when_left_open(request_text: str,
                                                                expected: str) -> None:
    assert texts("text", request_text, 1) == [expected]


@pytest.mark.parametrize(("request_text", "expected"), [
    ("Tell me the water quality of the lake.", "lake"),  # dev-easy-3: not "water quality"
    ("Find a shelter near the park.", "park"),
])
def test_a_place_after_its_preposition_leads_for_a_place_property(request_text: str,
                                                                  expected: str) -> None:
    assert texts("location", request_text, 1) == [expected]
    # for a property that is not a place the same word has no place's lift
    def prior(name: str) -> float:
        return next(c.prior for c in candidates(name, {"type": "string"}, request_text)
                    if c.text == expected)
    assert prior("topic") < prior("location")


def test_a_year_inside_a_date_is_no_name() -> None:
    # dev-easy-5: "2013" (from "November 25, 2013") was chosen as the location
    request = "Find available rooms in New York from November 25, 2013, to January 7, 2006."
    found = {c.text: c.prior for c in candidates("location", {"type": "string"}, request)}
    assert found["2013"] < -2.0
    assert max(found, key=lambda t: found[t]) == "New York"


@pytest.mark.parametrize(("name", "request_text", "expected"), [
    # dev-easy-37 / dev-easy-162: an optional language was dropped (the request never says
    # "language"); a language name is a value only a language property takes
    ("language", "Provide information about labor laws in Japan in Japanese.", "Japanese"),
    ("target_lang", "Format the text according to the style guide in English.", "English"),
    # dev-easy-127: "at 15:38" for an optional time_period; dev-easy-166: named, too
    ("time_period", "Provide me with the retail revenue analytics at 15:38.", "15:38"),
    ("time_period", "Assess the impact during the time period of 16:48.", "16:48"),
])
def test_a_value_of_the_propertys_own_kind_leads_and_is_offered_without_none(
        name: str, request_text: str, expected: str) -> None:
    """The value is the request's support, as a match by meaning is: a model asked "is it
    given?" of a value the request does not label says no (the 1.5B dropped dev-easy-166's
    time and an unseen catalog's "expiring 2027-01-31" with NONE against +6 nats of prior)."""
    from stackroute.server.routing.arguments.support import offered

    found = candidates(name, {"type": "string"}, request_text)
    assert found[0].text == expected and found[0].prior >= 3.0
    offer = offered(name, {name: {"type": "string"}}, found, request_text, set())
    assert [c.text for c in offer.candidates] == [expected] and not offer.may_decline
    # given to another property already: no longer this one's without NONE
    assert offered(name, {name: {"type": "string"}}, found, request_text, {expected}).may_decline


def test_no_language_is_offered_where_the_request_names_none() -> None:
    found = candidates("language", {"type": "string"}, "Provide information about labor laws.")
    assert not any(c.kind == "language" for c in found)
    assert not any(c.prior >= 3.0 for c in found)


def test_an_optional_reason_is_filled_only_where_the_request_says_why() -> None:
    from stackroute.server.routing.arguments.support import offered

    properties = {"order_id": {"type": "string"}, "reason": {"type": "string"}}
    request = "Refund order ORD-7781 because the item arrived damaged"
    found = candidates("reason", properties["reason"], request)
    offer = offered("reason", properties, found, request, {"ORD-7781"})
    # offered without NONE: the 1.5B asked "is it given?" of it said no (an unseen shop catalog)
    assert [c.text for c in offer.candidates] == ["the item arrived damaged"]
    assert not offer.may_decline
    plain = "Refund order ORD-7781 now"
    assert not offered("reason", properties, candidates("reason", properties["reason"], plain),
                       plain, {"ORD-7781"}).candidates


def test_a_date_property_gets_normalised_dates_and_no_piece_of_one() -> None:
    # dev-easy-5: check_in_date "January 7" and check_out_date "January" were chosen
    request = "Find available rooms in New York from November 25, 2013, to January 7, 2006."
    for name in ("check_in_date", "check_out_date"):
        found = [c.text for c in candidates(name, {"type": "string"}, request)]
        assert found[:2] == ["2013-11-25", "2006-01-07"]
        assert not any(t in found for t in ("January 7", "January", "2013", "November 25"))
        assert "New York" in found  # spans elsewhere stay


@pytest.mark.parametrize(("name", "request_text", "expected"), [
    # a value right before its property's noun (dev-easy-89, -83, -68, -42)
    ("team", "Retrieve the team hierarchy for the Sales team.", "Sales"),
    ("data", "Select the features from the 'income' dataset using the 'Wrapper' method.",
     "income"),
    ("method", "Select the features from the 'income' dataset using the 'Wrapper' method.",
     "Wrapper"),
    ("crop_name", "Monitor the infestation of pests in rice crops.", "rice"),
])
def test_a_value_right_before_its_propertys_noun_leads(name: str, request_text: str,
                                                      expected: str) -> None:
    assert texts(name, request_text, 1) == [expected]


def test_a_number_right_before_its_propertys_noun_leads() -> None:
    request = "a Marketing Manager position in Bangalore with 15 years of experience and 2 kids"
    found = candidates("years_experience", {"type": "integer"}, request)
    assert [c.value for c in found][:1] == [15] and found[0].prior >= 2.0


def test_a_word_siblings_share_labels_none_of_them() -> None:
    # dev-easy-139: "policy number DEF456" made "policy" a flight_number ("number")
    request = "Provide me with the insurance information for policy number DEF456."
    alone = {c.text: c.prior for c in candidates("flight_number", {"type": "string"}, request)}
    shared = {c.text: c.prior for c in candidates("flight_number", {"type": "string"}, request,
                                                  siblings=("policy_number",))}
    assert shared["policy"] < alone["policy"]
    assert texts("policy_number", request, 1, siblings=("flight_number",)) == ["DEF456"]


def test_a_piece_of_a_quoted_value_ranks_below_the_quote() -> None:
    # dev-easy-94: "Savings Spectacular" (inside the campaign's quoted name) became the audience
    request = ('Create an advertisement campaign called "Spring Savings Spectacular" targeting '
               "professionals with a budget of $30.0.")
    found = {c.text: c.prior for c in candidates("target_audience", {"type": "string"}, request)}
    assert found["professionals"] > found["Savings Spectacular"]
    assert found["Spring Savings Spectacular"] > found["Savings Spectacular"]


def test_a_numbers_unit_is_not_a_value_of_its_own() -> None:
    # dev-easy-86: "weighing 31.5 kg" gave `surgical_procedure` "kg"
    for request, unit, value in (("Schedule a patient weighing 80 kg for surgery", "kg",
                                  "surgery"),
                                 ("Pack a list of 6 items and a torch", "items", "torch")):
        found = texts("gear", request, 48)
        assert found.index(value) < found.index(unit), found


def test_a_value_found_or_located_after_its_label_is_cued() -> None:
    # dev-easy-126: "the circuit file located at 192.168.204.87"
    for request in ("Scan the report file located at 10.0.0.5 tonight",
                    "Scan the report file found at 10.0.0.5 tonight",
                    "Scan the report file stored at 10.0.0.5 tonight"):
        found = {c.text: c.prior for c in candidates("report_file", {"type": "string"}, request)}
        assert found["10.0.0.5"] == LITERAL_PRIOR + 1.5, request


def test_a_label_ending_in_a_word_the_siblings_share_still_labels_its_value() -> None:
    # "fat content of 13.1%": `content` is shared with protein_content, so it cued neither,
    # and standing between "fat" and the number it kept "fat" from labelling 13.1 too
    request = "Get the milk report with a fat content of 13.1% and protein content of 19.1%."
    schema = {"type": "number"}
    fat = candidates("fat_content", schema, request, siblings=("protein_content",))
    protein = candidates("protein_content", schema, request, siblings=("fat_content",))
    assert fat[0].text == "13.1" and fat[0].prior > fat[1].prior
    assert protein[0].text == "19.1" and protein[0].prior > protein[1].prior


def test_a_siblings_label_ending_in_its_own_word_holds_its_value_back() -> None:
    # "fat content at 13.1%": for protein_content, "content" is its own word, so fat_content's
    # label was "fat" alone, kept from the number by "content": 13.1 was not held back
    request = "The protein content is 19.1%, with a fat content at 13.1%."
    protein = candidates("protein_content", {"type": "number"}, request,
                         siblings=("fat_content",))
    assert [c.text for c in protein] == ["19.1", "13.1"]
    assert protein[1].prior < 0


@pytest.mark.parametrize("request_text", [
    "Show me the layout of the Central Library on the 51st floor.",
    "Which rooms are free on floor 51 of the tower?",
])
def test_an_ordinal_is_its_number_and_labelled_by_the_noun_after_it(request_text: str) -> None:
    found = candidates("floor", {"type": "integer"}, request_text)
    assert found[0].value == 51 and found[0].prior >= 2.0


@pytest.mark.parametrize("request_text", [
    "Give advice for a 49-year-old individual with 3 children.",
    "Give advice for someone who is 49 years old with 3 children.",
    "Give advice for a patient aged 49 with 3 children.",
])
def test_a_number_of_years_old_is_an_age(request_text: str) -> None:
    found = candidates("age", {"type": "integer"}, request_text)
    assert found[0].value == 49 and found[0].prior > found[1].prior
    assert candidates("children", {"type": "integer"}, request_text,
                      siblings=("age",))[0].value == 3


@pytest.mark.parametrize("name, request_text, value", [
    # "smoking" ends inside its noun phrase: the value is the whole phrase
    ("policy_area", "Advocate for policy change in the area of smoking regulations.",
     "smoking regulations"),
    # the word after is the property's own ("the elderly population"): "elderly" is the value
    ("target_population", "Plan a health campaign for the elderly population.", "elderly"),
])
def test_a_value_does_not_end_inside_its_noun_phrase(name: str, request_text: str,
                                                     value: str) -> None:
    assert candidates(name, {"type": "string"}, request_text)[0].text == value


def test_a_function_word_is_no_value() -> None:
    # dev-easy-121: "Check if there is any ...": `source` took "there"
    request = "Check if there is any copyright infringement in the book they have published."
    found = texts("source", request, 48)
    assert "there" not in found and "they" not in found and "have" not in found
    assert "book" in found


def test_a_clock_time_is_one_value_held_back_only_by_a_label_of_its_kind() -> None:
    # dev-easy-127: "social media data at 15:38": "data" labels data_sources, yet 15:38 is a
    # time (only a time property takes it), and its pieces "15" and "38" are no values at all
    request = "Provide me with the retail revenue analytics for social media data at 15:38."
    leaf = ("business_type", "data_sources", "metrics", "time_period")

    def found(name: str) -> list[Any]:
        return candidates(name, {"type": "string"}, request,
                          siblings=[n for n in leaf if n != name])

    assert found("time_period")[0].text == "15:38" and found("time_period")[0].prior >= 2.0
    assert all(c.prior < 0 for c in found("data_sources") if c.text in ("15", "38"))
    def time_prior(name: str, sibling: str) -> float:
        found = candidates(name, {"type": "string"}, "Book the end time at 15:38.",
                           siblings=[sibling])
        return next(c.prior for c in found if c.text == "15:38")

    assert time_prior("start_time", "end_time") < time_prior("end_time", "start_time")


def test_a_word_before_an_article_is_its_verb_not_a_value() -> None:
    # dev-easy-86: "and undergoing an appendectomy": `surgical_procedure` took "undergoing"
    request = "Plan the dosage for a patient weighing 31.5 kg and undergoing an appendectomy."
    found = {c.text: c.prior for c in candidates("surgical_procedure", {"type": "string"},
                                                 request)}
    assert found["appendectomy"] > found["undergoing"]


def test_a_lower_case_word_after_a_capitalised_one_is_a_cut_name() -> None:
    # dev-easy-57: "of Sodium chloride chemical": `chemical_name` took "chloride"
    request = "Calculate the consumption of Sodium chloride chemical with a quantity of 45."
    found = candidates("chemical_name", {"type": "string"}, request,
                       siblings=["production_quantity"])
    assert found[0].text == "Sodium chloride"


def test_a_whole_noun_phrase_leads_and_is_not_asked_for() -> None:
    # the phrase is lifted, its pieces not lowered: a value the request gives keeps
    # non-negative log-odds, so `missing_values: ask` does not ask for it
    found = {c.text: c.prior for c in candidates(
        "fish_type", {"type": "string"}, "Describe the swimming pattern of manta rays.",
        topic=topic_words("getSwimmingPattern", "Retrieve the swimming pattern"))}
    assert found["manta rays"] > found["manta"] >= 0


def test_a_label_starting_with_a_word_the_siblings_share_still_labels_its_value() -> None:
    # "soil as the slope material": "slope" is every sibling's, so "material" alone cued
    # slope_material, and "slope" stood between it and "soil"
    request = "Analyse a slope of 24.3 meters in a clay region with soil as the slope material."
    leaf = ("slope_height", "slope_material", "slope_geometry")
    found = candidates("slope_material", {"type": "string"}, request,
                       siblings=[n for n in leaf if n != "slope_material"])
    assert found[0].text == "soil"


def test_one_reading_of_the_request_serves_every_property_as_its_own_would() -> None:
    # a leaf's properties share one RequestText (filling._menus): each property's candidates
    # are the ones a reading of its own gives, for every kind of value
    request = ('Book 2 rooms at "Hotel Lux" on 7 Jan 2026 at 9am for ana@example.com, '
               "budget $1.2M, see https://a.example/x and file /srv/a/b.csv.")
    schemas: dict[str, dict[str, Any]] = {
        "rooms": {"type": "integer"}, "hotel_name": {"type": "string"},
        "check_in": {"type": "string", "format": "date"}, "time": {"type": "string"},
        "email": {"type": "string"}, "budget": {"type": "number"},
        "links": {"type": "array", "items": {"type": "string"}},
        "is_refundable": {"type": "boolean"}}
    read = RequestText.read(request)
    for name, schema in schemas.items():
        siblings = [n for n in schemas if n != name]
        shared = candidates(name, schema, read, siblings=siblings)
        assert shared, name
        assert shared == candidates(name, schema, request, siblings=siblings), name


def test_a_name_after_a_place_preposition_is_where_the_labelled_thing_is() -> None:
    # dev-easy-81: "a facial treatment at Tranquil Wellness Center" labelled the centre for
    # treatment_type, so spa_name held it back as a sibling's value and took "John Smith"
    request = ("Book a facial treatment at Tranquil Wellness Center for John Smith on June 24, "
               "2002, at 09:16, with a duration of 86 minutes.")
    leaf = ("spa_name", "date", "time", "treatment_type", "duration", "customer_name")

    def first(name: str) -> str:
        return candidates(name, {"type": "string"}, request,
                          siblings=[n for n in leaf if n != name])[0].text

    assert first("treatment_type") == "facial"
    assert first("spa_name") == "Tranquil Wellness Center"
    # a number after the preposition is still the labelled thing's ("a speed at 60")
    assert texts("speed", "Set the fan speed at 60 for the kitchen.", 1,
                 {"type": "integer"}) == ["60"]


def test_a_label_beside_the_leafs_own_words_is_its_name_said_again() -> None:
    # dev-easy-41: "forest restoration" (the leaf's name, getForestRestorationProgress) put
    # `forest_type`'s label on "restoration"; the rainforest the request names is the value
    request = ("Provide me with the progress of forest restoration in the tropical rainforest "
               "of Brazil in the year 1992.")
    topic = topic_words("getForestRestorationProgress",
                        "Retrieve the progress of forest restoration")
    found = {c.text: c.prior for c in candidates("forest_type", {"type": "string"}, request,
                                                 siblings=["location", "year"], topic=topic)}
    assert found["tropical rainforest"] > found["restoration"]  # (Brazil: `location`'s)
    assert found["restoration"] < 0


def test_a_value_that_shares_the_leafs_stem_keeps_its_label() -> None:
    # the name said again is the leaf's own phrase: "locked" shares `lock` with the leaf, but
    # "locked state" is no phrase of it, so the label stands (a value, not the tool restated)
    topic = topic_words("setLockState", "Set the state of a smart lock")
    found = candidates("state", {"type": "string"}, "Set the smart lock to the locked state.",
                       siblings=["lock_id"], topic=topic)
    assert found[0].text == "locked"


def test_an_optional_phone_in_the_patterns_digits_is_offered_as_its_own_kind() -> None:
    """An unseen clinic: "a new cell number, 971-555-0188" for a `phone` whose pattern wants
    digits only; the digits are the value, as a phone as written is where no pattern says."""
    from stackroute.server.routing.arguments.support import offered

    properties = {"patient_id": {"type": "string"},
                  "phone": {"type": "string", "pattern": "^[0-9]{10,15}$"}}
    request = "P-31877 has a new cell number, 971-555-0188, please update it"
    found = candidates("phone", properties["phone"], request, siblings=("patient_id",))
    offer = offered("phone", properties, found, request, {"P-31877"})
    assert [c.text for c in offer.candidates] == ["9715550188"] and not offer.may_decline


@pytest.mark.parametrize("quantity", ["90-day", "3-night", "10-mg"])
def test_a_number_joined_to_its_unit_is_no_id(quantity: str) -> None:
    """An unseen clinic: "a refill for a 90-day supply" gave `medication` "90-day", with an
    id's bonus, over "lisinopril"; a code that holds digits and letters is still an id."""
    request = f"Put in a refill of lisinopril for a {quantity} supply, order RX-9034"
    kinds = {c.text: c.kind for c in candidates("medication", {"type": "string"}, request)}
    assert (kinds[quantity], kinds["RX-9034"]) == ("span", "id")


@pytest.mark.parametrize(("name", "schema", "request_text", "used", "expected"), [
    # a flag the request sets in words, named or by a yes/no word
    ("force", {"type": "boolean"}, "Force stop the instance i-09f8e7d6c5", {"i-09f8e7d6c5"},
     [True]),
    ("notify", {"type": "boolean"}, "Cancel order 5 and do not notify the customer", {"5"},
     [False]),
    # a number in the unit or the currency its description counts in
    ("max_rate", {"type": "number", "description": "Highest price per night, in US dollars"},
     "Rooms in Austin for 3 nights, nothing over $250 a night.", {"3"}, [250]),
    ("scan_interval", {"type": "integer", "description": "Minutes between scans, in minutes"},
     "Scan the network every 22 minutes", set(), [22]),
])
def test_a_value_the_request_labels_for_an_optional_property_is_offered_without_none(
        name: str, schema: dict[str, Any], request_text: str, used: set[str],
        expected: list[Any]) -> None:
    """The 1.5B answered NONE to "Force stop" and to "nothing over $250 a night" for an
    optional `max_nightly_rate` priced in dollars (unseen IT-ops and travel catalogs), as it
    did to dates and e-mails before they were offered as their own kind."""
    from stackroute.server.routing.arguments.support import offered

    properties = {"id": {"type": "string"}, name: schema}
    found = candidates(name, schema, request_text, siblings=("id",))
    offer = offered(name, properties, found, request_text, used)
    assert [c.value for c in offer.candidates] == expected and not offer.may_decline


@pytest.mark.parametrize(("name", "schema", "request_text"), [
    ("versioning", {"type": "boolean"}, "Create a bucket named logs"),  # not said
    # a yes/no word that governs something else ("drop off"): an unseen travel desk's
    # `add_gps` was set false
    ("add_gps", {"type": "boolean"},
     "Reserve a midsize car at MUC, pick up 2027-10-03 at 09:30, drop off 2027-10-07."),
    ("max_rate", {"type": "number", "description": "Highest star rating"},
     "Rooms in Austin, nothing over $250 a night."),  # a number of another kind
])
def test_a_value_the_request_does_not_label_is_not_offered_without_none(
        name: str, schema: dict[str, Any], request_text: str) -> None:
    from stackroute.server.routing.arguments.support import offered

    found = candidates(name, schema, request_text)
    offer = offered(name, {name: schema}, found, request_text, set())
    assert offer.may_decline or not offer.candidates
