"""Tier (a): strings with an author's `pattern` end at the cap, and the rewrite behind it
(`grammars/regex_bounds.py`) loses no match up to the cap. No model: the grammar with the
real tokenizer, and Python's `re` (through its own parser, not ours) as the oracle."""

from __future__ import annotations

import doctest
import itertools
import json
import logging
import random
import re
from re import _constants as sre_constants  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

import pytest
from stackroute.grammars import regex_bounds
from stackroute.grammars.regex_bounds import UnboundablePattern, bound_pattern
from stackroute.grammars.schema import GrammarTokenizerInfo, compile_schema
from stackroute.grammars.string_caps import cap_string_lengths
from stackroute.runtime.schemas import argument_errors

COMPACT = {"separators": (",", ":"), "ensure_ascii": False}


def encoder(tokenizer: Any) -> Any:
    return lambda text: tokenizer.encode(text, add_special_tokens=False)


def accepted_chars(info: GrammarTokenizerInfo, tokenizer: Any, schema: dict[str, Any],
                   prefix: str, char: str, num_tries: int = 300) -> int:
    """How many copies of `char` (one token) the compiled grammar accepts after `prefix`."""
    matcher = compile_schema(schema, info).matcher()
    for token in encoder(tokenizer)(prefix):
        assert matcher.accept(token)
    (token,) = encoder(tokenizer)(char)
    for count in range(num_tries):
        if not matcher.accept(token):
            return count
    return num_tries


def accepts(info: GrammarTokenizerInfo, tokenizer: Any, schema: dict[str, Any],
            text: str) -> bool:
    matcher = compile_schema(schema, info).matcher()
    return all(matcher.accept(t) for t in encoder(tokenizer)(text)) and matcher.is_complete


# -- the bug: the grammar itself --------------------------------------------------------------

@pytest.mark.parametrize("pattern", ["[a-z ]*", "^[a-z ]*$", ".*", r"\w+"])
def test_a_string_with_an_unbounded_pattern_ends_at_the_cap(
        smollm2_tokenizer: Any, smollm2_grammar_info: GrammarTokenizerInfo,
        pattern: str) -> None:
    # xgrammar ignores maxLength beside a pattern (measured on 0.2.8 and 0.2.9): before the
    # rewrite the grammar took all 300 characters, and a small model could write to the
    # token cap inside the string
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}},
              "required": ["x"]}
    capped = cap_string_lengths(schema, 40)
    assert accepted_chars(smollm2_grammar_info, smollm2_tokenizer, capped, '{"x":"', "a") == 40
    assert accepts(smollm2_grammar_info, smollm2_tokenizer, capped,
                   json.dumps({"x": "a" * 40}, **COMPACT))  # type: ignore[arg-type]
    assert schema["properties"]["x"] == {"type": "string", "pattern": pattern}  # untouched


def test_xgrammar_itself_ignores_max_length_beside_a_pattern(
        smollm2_tokenizer: Any, smollm2_grammar_info: GrammarTokenizerInfo) -> None:
    # The premise of the rewrite, measured on 0.2.8 and 0.2.9. If a later xgrammar enforces
    # maxLength here, this fails, and the rewrite could give way to the author's keyword.
    schema = {"type": "string", "pattern": "[a-z ]*", "maxLength": 5, "minLength": 2}
    assert accepted_chars(smollm2_grammar_info, smollm2_tokenizer, schema, '"', "a") == 300


def test_an_authors_max_length_beside_a_pattern_is_the_bound(
        smollm2_tokenizer: Any, smollm2_grammar_info: GrammarTokenizerInfo) -> None:
    schema = {"type": "string", "pattern": "[a-z ]*", "maxLength": 10, "minLength": 2}
    capped = cap_string_lengths(schema, 64)
    assert capped == {"type": "string", "pattern": "[a-z ]{0,10}", "maxLength": 10,
                      "minLength": 2}
    assert accepted_chars(smollm2_grammar_info, smollm2_tokenizer, capped, '"', "a") == 10


def test_a_pattern_it_cannot_bound_is_left_alone_with_the_reason(
        caplog: pytest.LogCaptureFixture) -> None:
    schema = {"type": "string", "pattern": r"^([a-z0-9-]+\.)+[a-z]{2,}$"}
    with caplog.at_level(logging.WARNING, logger="stackroute.grammars.string_caps"):
        assert cap_string_lengths(schema, 64) == schema
    assert "inside another" in caplog.text and "[a-z0-9-]" in caplog.text


def test_bounded_patterns_enums_and_nested_strings() -> None:
    schema = {"type": "object", "properties": {
        "code": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{4}$"},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "#[a-z]+"}},
        "kind": {"type": "string", "pattern": "[a-z]*", "enum": ["ab", "cd"]}}}
    capped = cap_string_lengths(schema, 8)
    assert capped["properties"]["code"] == schema["properties"]["code"]
    assert capped["properties"]["tags"]["items"] == {"type": "string", "pattern": "#[a-z]{1,7}"}
    assert capped["properties"]["kind"] == schema["properties"]["kind"]  # the enum bounds it


def test_answers_are_still_validated_against_the_callers_schema() -> None:
    # The machine checks arguments against the leaf's own schema (runtime/machine.py); an
    # answer the author's maxLength refuses is refused there, whatever the grammar allowed.
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": "^[a-z]*$",
                                                     "maxLength": 5}}}
    assert argument_errors(schema, {"x": "abcde"}) == []
    assert argument_errors(schema, {"x": "abcdef"})
    assert argument_errors(schema, {"x": "ABC"})


def test_the_module_examples_run() -> None:
    assert doctest.testmod(regex_bounds).failed == 0


# -- the rewrite: an oracle from Python's own regex parser -------------------------------------

def sample(pattern: str, rng: random.Random, pool: str, max_reps: int) -> str | None:
    """A random string `pattern` fully matches, drawn through `re`'s own parser (independent
    of the module under test), classes filled from `pool`; None where the draw found no
    match (a class with nothing in `pool`, an anchor in the middle)."""
    def member(items: Any, char: str) -> bool:
        code, negate, hit = ord(char), False, False
        for op, arg in items:
            if op is sre_constants.NEGATE:
                negate = True
            elif op is sre_constants.LITERAL:
                hit |= code == arg
            elif op is sre_constants.RANGE:
                hit |= arg[0] <= code <= arg[1]
            elif op is sre_constants.CATEGORY:
                hit |= bool(re.fullmatch(CATEGORIES[arg], char))
            else:
                raise LookupError(op)
        return hit != negate

    def draw(items: Any) -> str:
        out = []
        for op, arg in items:
            if op is sre_constants.LITERAL:
                out.append(chr(arg))
            elif op is sre_constants.ANY:
                out.append(rng.choice(pool))
            elif op is sre_constants.IN:
                out.append(rng.choice([c for c in pool if member(arg, c)] or [""]))
            elif op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT,
                        sre_constants.POSSESSIVE_REPEAT):
                lo, hi, body = arg
                top = lo + max_reps if hi is sre_constants.MAXREPEAT else hi
                out.extend(draw(body) for _ in range(rng.randint(lo, top)))
            elif op is sre_constants.SUBPATTERN:
                out.append(draw(arg[-1]))
            elif op is sre_constants.BRANCH:
                out.append(draw(rng.choice(arg[1])))
            elif op is not sre_constants.AT:
                raise LookupError(op)
        return "".join(out)
    try:
        text = draw(sre_parse.parse(pattern))
    except LookupError:
        return None
    return text if re.fullmatch(pattern, text) else None


CATEGORIES = {sre_constants.CATEGORY_DIGIT: r"\d", sre_constants.CATEGORY_NOT_DIGIT: r"\D",
              sre_constants.CATEGORY_WORD: r"\w", sre_constants.CATEGORY_NOT_WORD: r"\W",
              sre_constants.CATEGORY_SPACE: r"\s", sre_constants.CATEGORY_NOT_SPACE: r"\S"}


# Each row: a pattern, an alphabet that exercises it, whether the bound is exact (one
# unbounded quantifier over a fixed-width atom in a fixed-width context).
PATTERNS: list[tuple[str, str, bool]] = [
    ("[a-z ]*", "ab ", True),
    ("^[a-z ]*$", "ab ", True),
    (".*", "ab", True),
    ("a+", "ab", True),
    ("a+?", "ab", True),
    ("a*+", "ab", True),
    ("a{2,}", "ab", True),
    ("a{2,}?", "ab", True),
    (r"\w+", "a_1-", True),
    (r"\d{3}-\d+", "12-", True),
    (r"[\]\\a]+", "]\\ab", True),
    (r"[^\]a]*", "]ab", True),
    (r"\.[a-z]*\.", ".ab", True),
    (r"\u00e9+x", "éx", True),
    ("é*", "éa", True),
    ("(?:ab)+", "ab", True),
    ("((ab)c)*", "abc", True),
    ("(?i)[a-z]+", "aB", True),
    ("(?P<name>[a-z])+", "ab", True),
    ("abc|[a-z]+", "abc", False),
    ("^(foo|ba+)$", "foab", False),
    (r"\w+@\w+", "a@", False),
    ("[a-z]+[0-9]*", "a1", False),
    ("(a|bc)*d", "abcd", False),
    ("(a*){2}", "ab", False),
    ("x?y*z{0,2}", "xyz", False),
    ("[a-c]{1,3}", "abcd", True),  # bounded already
]


@pytest.mark.parametrize(("pattern", "alphabet", "is_exact"), PATTERNS)
def test_every_short_match_is_kept_and_nothing_new_is_matched(
        pattern: str, alphabet: str, is_exact: bool) -> None:
    cap = 6
    bounded = bound_pattern(pattern, cap)
    original, rewritten = re.compile(pattern), re.compile(bounded.pattern)
    longest = 0
    for length in range(cap + 4):
        for chars in itertools.product(alphabet, repeat=length):
            text = "".join(chars)
            before, after = bool(original.fullmatch(text)), bool(rewritten.fullmatch(text))
            if length <= cap:
                assert before == after, (pattern, bounded.pattern, text)
            else:
                assert before or not after, (pattern, bounded.pattern, text)  # nothing new
            if after:
                longest = max(longest, length)
    assert longest <= bounded.max_chars
    if is_exact:
        assert longest <= bounded.max_chars <= cap


@pytest.mark.parametrize(("pattern", "alphabet", "is_exact"), PATTERNS)
def test_sampled_matches_up_to_a_real_cap_are_kept(pattern: str, alphabet: str,
                                                   is_exact: bool) -> None:
    cap = 64
    bounded = bound_pattern(pattern, cap)
    rewritten = re.compile(bounded.pattern)
    rng = random.Random(pattern)
    num_short = num_long = 0
    for _ in range(400):
        text = sample(pattern, rng, alphabet + "é]\\.@-_1", max_reps=rng.choice([3, 40, 90]))
        if text is None:
            continue
        is_matched = bool(rewritten.fullmatch(text))
        if len(text) <= cap:
            assert is_matched, (pattern, bounded.pattern, text)
            num_short += 1
        else:
            assert not is_matched if is_exact else len(text) <= bounded.max_chars or not (
                is_matched), (pattern, bounded.pattern, text)
            num_long += 1
    assert num_short > 0
    assert num_long > 0 or bounded.pattern == pattern  # a bounded pattern draws no long ones


@pytest.mark.parametrize(("pattern", "reason"), [
    (r"(\w+\.)+", "inside another"),
    ("(?=a)a", "lookaround"),
    ("(?!a)[a-z]+", "lookaround"),
    ("(?<=a)b+", "lookaround"),
    (r"(a)\1+", "backreference"),
    (r"(?P<x>a)(?P=x)*", "backreference"),
    (r"\bfoo\w*", "assertion"),
    ("[]a]*", "engines disagree"),
    ("[[:alpha:]]+", "inside a class"),
    ("a{,3}b*", "not a count"),
    ("*a", "nothing to repeat"),
    ("a**", "repeated quantifier"),
    ("(ab*", "unclosed group"),
    ("ab*)", "unmatched"),
    ("[ab*", "unterminated class"),
    ("a{5,2}b*", "below its minimum"),
    ("^*a", "anchor"),
])
def test_patterns_it_cannot_bound_safely_are_refused_with_the_reason(
        pattern: str, reason: str) -> None:
    with pytest.raises(UnboundablePattern, match=reason):
        bound_pattern(pattern, 64)


@pytest.mark.parametrize(("pattern", "expected"), [
    ("[a-z ]*", "[a-z ]{0,64}"),
    ("^[a-z]+$", "^[a-z]{1,64}$"),
    ("a{3,}", "a{3,64}"),
    ("a*?", "a{0,64}?"),
    ("a++", "a{1,64}+"),
    (r"[A-Z]{2}\d+", r"[A-Z]{2}\d{1,62}"),
    (r"\w+@\w+\.com", r"\w{1,58}@\w{1,58}\.com"),  # 64 - "@", "\w", ".com"
    ("(?:ab)*c", "(?:ab){0,31}c"),
    ("x|y*", "x|y{0,64}"),
    ("a{70,}", "a{70}"),  # nothing of 64 characters fits: the fewest count loses nothing
    ("[a-c]{1,3}", "[a-c]{1,3}"),
])
def test_the_rewrite_changes_only_counts(pattern: str, expected: str) -> None:
    assert bound_pattern(pattern, 64).pattern == expected


def test_a_bound_above_what_the_engine_compiles_is_refused() -> None:
    # xgrammar 0.2.8 fails to compile a count above 128 (string_caps.max_pattern_count)
    assert bound_pattern("[a-z]*", 128, max_count=128).pattern == "[a-z]{0,128}"
    with pytest.raises(UnboundablePattern, match="count of 300, above the 128"):
        bound_pattern("[a-z]*", 300, max_count=128)
    assert bound_pattern("[a-z]*", 300).pattern == "[a-z]{0,300}"  # 0.2.9 compiles it


def test_rewritten_patterns_compile_in_xgrammar(
        smollm2_tokenizer: Any, smollm2_grammar_info: GrammarTokenizerInfo) -> None:
    for pattern, _, _ in PATTERNS:
        schema = {"type": "string", "pattern": bound_pattern(pattern, 64).pattern}
        compile_schema(schema, smollm2_grammar_info)  # raises InvalidGrammarError if not
    unicode = cap_string_lengths({"type": "string", "pattern": "é+"}, 5)
    assert accepts(smollm2_grammar_info, smollm2_tokenizer, unicode, '"ééééé"')
    assert accepted_chars(smollm2_grammar_info, smollm2_tokenizer, unicode, '"', "é") == 5


@pytest.mark.model
def test_the_embedded_model_stops_inside_an_unbounded_pattern(engine: Any) -> None:
    # Tier (c): with the real model, a repetitive prompt filled the string to the token cap
    # before (measured: 120 of 120 tokens, finish "length"); now the string ends at the cap.
    from stackroute.server.engines.base import Constraint, SamplingOptions

    schema = {"type": "object", "properties": {"note": {"type": "string",
                                                        "pattern": "[a-z ]*"}},
              "required": ["note"]}
    prompt = "Sing: " + "la " * 40 + "la. Answer as JSON: "
    generation = engine.generate(prompt, constraint=Constraint.json(schema),
                                 sampling=SamplingOptions(max_tokens=384))
    assert generation.finish_reason == "stop"
    note = json.loads(generation.text)["note"]
    assert re.fullmatch("[a-z ]*", note) and len(note) <= engine.max_string_chars
    assert generation.usage.generated_tokens < 60
