"""The question a tools answer asks, and the request a reply to it is routed as."""

from __future__ import annotations

from stackroute.server.service.values_question import Turn, routed_task, values_question


def test_a_reply_is_routed_with_the_request_it_answers() -> None:
    question = values_question("send_money", {"payee": "Asha"}, {"amount": {"type": "number"}})
    turns = [Turn(role="system", text="be brief"), Turn(role="user", text="Send money to Asha"),
             Turn(role="assistant", text=question), Turn(role="user", text="500")]
    assert routed_task(turns) == "Send money to Asha\n500"


def test_other_assistant_words_and_tool_exchanges_end_the_request() -> None:
    assert routed_task([Turn(role="user", text="hello"), Turn(role="assistant", text="Hi!"),
                        Turn(role="user", text="weather in Oslo")]) == "weather in Oslo"
    assert routed_task([Turn(role="user", text="send 5 to Bo"),
                        Turn(role="assistant", text="", has_tool_calls=True),
                        Turn(role="tool", text="{}"),
                        Turn(role="user", text="and 6 to Al")]) == "and 6 to Al"


def test_several_values_and_enums_are_named() -> None:
    text = values_question("book", {}, {"date": {"type": "string", "format": "date"},
                                        "seat": {"enum": ["aisle", "window"]}})
    assert text == ('To call book I still need the date (string) and seat (one of "aisle", '
                    '"window"). What should they be?')
