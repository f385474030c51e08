"""The ignored-fields header: whatever names a client sends, the header is valid HTTP."""

from __future__ import annotations

from stackroute.server.http.openai_leniency import IGNORED_FIELDS_HEADER, MAX_NAMES, header_of


def test_a_header_past_the_name_bound_is_latin_1_with_the_count() -> None:
    # schemathesis found it: 20+ ignored fields made the header end in a U+2026 ellipsis,
    # which Starlette cannot encode (latin-1), so the request was a 500
    names = [f"field{i}" for i in range(MAX_NAMES + 3)]
    value = header_of(names)[IGNORED_FIELDS_HEADER]
    value.encode("latin-1")  # raises on anything a header cannot carry
    assert value.endswith(", ... (3 more)")
    assert value.count(",") == MAX_NAMES


def test_names_with_any_characters_are_written_safely() -> None:
    value = header_of(["é\u2026", "a\r\nb", "ok.name-1"])[IGNORED_FIELDS_HEADER]
    assert value == "??, a??b, ok.name-1"
    value.encode("ascii")
