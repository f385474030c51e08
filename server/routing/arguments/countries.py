"""Countries a request names, as the ISO 3166-1 code a property wants.

A property wants a country code where its schema takes two or three capital letters (a
pattern, an enum of codes) and its name or description speaks of a country or a nationality
("Traveler's passport country, ISO 3166-1 alpha-2, e.g. DE"). The request names a country by
its name ("India", "the United States"), a short form ("USA", "UK") or its people's adjective
("a German citizen"). Names and codes come from `pycountry` (the ISO 3166-1 list); the
adjectives are made from the names by the usual English endings ("India" -> "Indian",
"Japan" -> "Japanese"), where a made adjective would name two countries it names none, and the
irregular ones are listed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pycountry
from stackroute.server.embeddings.words import split_name
from stackroute.server.routing.arguments.candidate import Candidate

# the words of a property's name or description that say it holds a country
_COUNTRY_WORDS = frozenset(("country", "countries", "nationality", "citizenship", "passport",
                            "3166"))
# the words of a property's name that say it holds whose a traveler is, not where one goes: a
# people's adjective ("a German citizen") is this property's value before a country's name
_WHOSE_WORDS = frozenset(("nationality", "citizenship", "passport", "citizen"))
_ALIASES = {
    "USA": "US", "U.S.": "US", "U.S.A.": "US", "US": "US",
    "United States of America": "US", "UK": "GB", "U.K.": "GB", "Britain": "GB",
    "Great Britain": "GB", "England": "GB", "Scotland": "GB", "Wales": "GB",
    "Russia": "RU", "Holland": "NL", "Czech Republic": "CZ", "Turkey": "TR",
    "Ivory Coast": "CI", "Burma": "MM", "Cape Verde": "CV", "East Timor": "TL",
    "Macedonia": "MK", "Swaziland": "SZ", "Vatican": "VA", "UAE": "AE", "Emirates": "AE",
}
# adjectives the endings do not make
_ADJECTIVES = {
    "American": "US", "British": "GB", "English": "GB", "Scottish": "GB", "Welsh": "GB",
    "French": "FR", "Spanish": "ES", "Dutch": "NL", "Swiss": "CH", "Danish": "DK",
    "Irish": "IE", "Filipino": "PH", "Thai": "TH", "Greek": "GR", "Finnish": "FI",
    "Turkish": "TR", "Polish": "PL", "Swedish": "SE", "Norwegian": "NO", "Portuguese": "PT",
    "Vietnamese": "VN", "Czech": "CZ", "Belgian": "BE", "Emirati": "AE", "Saudi": "SA",
    "Icelandic": "IS", "Argentine": "AR", "Argentinian": "AR", "Peruvian": "PE",
    "Korean": "KR", "South Korean": "KR", "North Korean": "KP", "Russian": "RU",
    "New Zealander": "NZ", "Luxembourgish": "LU", "Lebanese": "LB", "Maltese": "MT",
    "Taiwanese": "TW", "Laotian": "LA", "Malagasy": "MG", "Bahraini": "BH",
    "Hungarian": "HU", "Ukrainian": "UA", "Ghanaian": "GH", "Chilean": "CL",
    "Nigerian": "NG", "Nigerien": "NE",
}
_ENDINGS = (("", "n"), ("", "an"), ("", "ian"), ("", "i"), ("", "ese"), ("a", "ese"),
            ("a", "an"), ("a", "ian"), ("e", "ian"), ("o", "an"), ("y", "ian"), ("y", ""),
            ("y", "an"), ("en", "ish"), ("and", "ish"))


# a people's adjective stands this far above a country's name for a property that holds whose a
# traveler is ("a German citizen flying to India": DE is the nationality)
WHOSE_BONUS = 0.5


@dataclass(frozen=True)
class CountryMention:
    alpha_2: str
    alpha_3: str
    span: tuple[int, int]
    is_adjective: bool  # "German", not "Germany"


def code_length(name: str, schema: Mapping[str, Any]) -> int | None:
    """2 or 3 where property `name` wants an ISO 3166-1 alpha-2 or alpha-3 code: its name or
    description speaks of a country and its schema takes that many capital letters (a pattern
    such as `^[A-Z]{2}$`, an enum of codes, or a length of 2 or 3); else None."""
    said = set(split_name(name)) | set(split_name(str(schema.get("description", ""))))
    if not said & _COUNTRY_WORDS:
        return None
    length = capitals_length(schema)
    if length in (2, 3):
        return length
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):
        for length in (2, 3):
            if all(len(v) == length and v.isupper() for v in enum):
                return length
    return None


def capitals_length(schema: Mapping[str, Any]) -> int | None:
    """How many capital letters the schema takes as a code: `^[A-Z]{n}$`, or a string of
    exactly n characters; None otherwise (countries' and currencies' codes).

    >>> capitals_length({"pattern": "^[A-Z]{3}$"}), capitals_length({"minLength": 2,
    ...                                                               "maxLength": 2})
    (3, 2)
    """
    pattern = re.fullmatch(r"\^?\[A-Z\]\{(\d)\}\$?", str(schema.get("pattern", "")))
    if pattern is not None:
        return int(pattern[1])
    length = schema.get("maxLength")
    return length if isinstance(length, int) and schema.get("minLength") == length else None


def holds_whose(name: str) -> bool:
    """Whether property `name` holds a traveler's nationality (a people's adjective is its
    value): `nationality`, `passport_country`, `citizenship`."""
    return bool(set(split_name(name)) & _WHOSE_WORDS)


def country_candidates(name: str, schema: Mapping[str, Any], text: str, *,
                       prior: float) -> list[Candidate]:
    """The countries `text` names as the code property `name` wants (`code_length`), each at
    `prior` (`WHOSE_BONUS` more for an adjective where the property holds a nationality), as
    enum values where the schema lists its codes; none where it wants no code."""
    length = code_length(name, schema)
    if length is None:
        return []
    enum = schema.get("enum")
    kind = "enum" if isinstance(enum, list) else "country"
    whose = holds_whose(name)
    out = []
    for mention in find_countries(text):
        code = mention.alpha_2 if length == 2 else mention.alpha_3
        if kind == "enum" and code not in enum:
            continue
        bonus = WHOSE_BONUS if whose and mention.is_adjective else 0.0
        out.append(Candidate(code, code, kind, prior + bonus, mention.span))
    return out


def find_countries(text: str) -> list[CountryMention]:
    """The countries `text` names, in order: names, short forms and adjectives, each a
    capitalised phrase of its own (the longest that names one).

    >>> [(m.alpha_2, m.is_adjective) for m in find_countries("A German citizen flying to India")]
    [('DE', True), ('IN', False)]
    >>> [m.alpha_3 for m in find_countries("from the United States to the UK")]
    ['USA', 'GBR']
    """
    names, pattern = _table()
    out = []
    for match in pattern.finditer(text):
        code, is_adjective = names[match[0]]
        country = pycountry.countries.get(alpha_2=code)
        out.append(CountryMention(code, country.alpha_3, match.span(), is_adjective))
    return out


@functools.cache
def _table() -> tuple[dict[str, tuple[str, bool]], re.Pattern[str]]:
    named: dict[str, set[str]] = {}
    made: dict[str, set[str]] = {}
    for country in pycountry.countries:
        base = getattr(country, "common_name", country.name)
        forms = {country.name, base, getattr(country, "official_name", base),
                 country.name.split(",")[0]}
        for form in forms:
            named.setdefault(form, set()).add(country.alpha_2)
        if " " not in base and "," not in base:
            for drop, ending in _ENDINGS:
                if base.endswith(drop):
                    made.setdefault(base[:len(base) - len(drop)] + ending, set()).add(
                        country.alpha_2)
    # a form two countries share ("Korea", "Congo"; "Nigerian") names neither
    names = {form: (next(iter(codes)), False) for form, codes in named.items()
             if len(codes) == 1}
    names |= {alias: (code, False) for alias, code in _ALIASES.items()}
    for adjective, codes in made.items():
        if len(codes) == 1 and adjective not in names:
            names[adjective] = (next(iter(codes)), True)
    names |= {adjective: (code, True) for adjective, code in _ADJECTIVES.items()}
    alternation = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return names, re.compile(rf"(?<![\w.])(?:{alternation})(?![\w])")
