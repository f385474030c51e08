"""Drafts copied from the prompt's text (server/engines/prompt_lookup.py), with a toy
character tokenizer so every expectation can be read off the strings."""

from __future__ import annotations

import pytest
from stackroute.server.engines.prompt_lookup import PromptLookup


def chars(text: str) -> list[int]:
    return [ord(c) for c in text]


def spelled(ids: tuple[int, ...]) -> str:
    return "".join(chr(i) for i in ids)


def test_the_text_after_the_last_match_is_drafted() -> None:
    lookup = PromptLookup("pay Asha. Request: send 500 dollars to Asha Rao now", chars,
                          max_draft_tokens=6)
    # the last "to Asha" occurrence; the cut text's last token is held back
    assert spelled(lookup.draft('{"to": "to Asha', max_tokens=10)) == " Rao n"


def test_the_longest_suffix_wins_over_an_earlier_shorter_match() -> None:
    lookup = PromptLookup("Asha Xu ... send to Asha Rao", chars, max_draft_tokens=4)
    assert spelled(lookup.draft("to Asha", max_tokens=4)) == " Rao"


def test_no_draft_without_a_match_or_a_letter() -> None:
    lookup = PromptLookup('say "hello" to Bob', chars)
    assert lookup.draft("Zanzibar", max_tokens=8) == ()
    assert lookup.draft('": "', max_tokens=8) == ()  # punctuation alone matches anywhere
    assert lookup.draft("Bo", max_tokens=8) == ()  # under three characters


def test_the_draft_respects_both_limits() -> None:
    lookup = PromptLookup("the value is 1234567890 and more", chars, max_draft_tokens=3)
    assert spelled(lookup.draft("is 12", max_tokens=8)) == "345"
    assert spelled(lookup.draft("is 12", max_tokens=2)) == "34"
    assert lookup.draft("is 12", max_tokens=0) == ()


def test_the_end_of_the_prompt_is_not_held_back() -> None:
    lookup = PromptLookup("to Asha", chars)
    assert spelled(lookup.draft("xx to As", max_tokens=8)) == "ha"


def test_a_draft_needs_a_token_at_least() -> None:
    with pytest.raises(ValueError, match="max_draft_tokens must be at least 1, got 0"):
        PromptLookup("text", chars, max_draft_tokens=0)
