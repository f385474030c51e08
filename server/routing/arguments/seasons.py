"""Terms a request names by season and year ("Fall 2027", "spring 2027", "fall 27", "this fall
(2027)"), as the code a property takes: an enum value or a pattern's form among the usual ways
of writing one ("2027FA", "FA2027", "FA27", "2027-FA", "Fall 2027"), for a property whose name or
description speaks of a term (a semester, a season, a session). Nothing is offered where the
property takes none of them, or the request names a season without its year.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from stackroute.server.embeddings.words import split_name
from stackroute.server.routing.arguments.candidate import Candidate
from stackroute.server.routing.arguments.pattern_forms import matches

_TERM_WORDS = frozenset(("term", "terms", "semester", "semesters", "season", "session",
                         "quarter", "trimester", "intake"))
_SEASONS = {"fall": ("FA", "F", "FALL", "Fall"), "autumn": ("FA", "F", "FALL", "Fall"),
            "spring": ("SP", "S", "SPR", "Spring"), "summer": ("SU", "SUM", "Summer"),
            "winter": ("WI", "W", "WIN", "Winter")}
_TERM = re.compile(r"\b(?P<season>fall|autumn|spring|summer|winter)(?:\s+(?:term|semester|"
                   r"quarter|session))?[\s,(]*'?(?P<year>(?:19|20)\d\d|\d\d)\b(?!\s*[:%])",
                   re.IGNORECASE)


def term_candidates(name: str, schema: Mapping[str, Any], text: str, *,
                    prior: float) -> list[Candidate]:
    """The terms `text` names, each in the first form property `name` takes, at `prior`,
    where its name or description speaks of a term (a course code's pattern may take "FA
    2027" too).

    >>> [c.value for c in term_candidates("term", {"enum": ["2027SP", "2027FA"]}, "fall 2027",
    ...                                   prior=3.0)]
    ['2027FA']
    """
    enum = schema.get("enum")
    pattern = schema.get("pattern")
    said = set(split_name(name)) | set(split_name(str(schema.get("description", ""))))
    if (not isinstance(enum, list) and not isinstance(pattern, str)) or not said & _TERM_WORDS:
        return []
    out = []
    for match in _TERM.finditer(text):
        year = match["year"]
        year = year if len(year) == 4 else "20" + year
        takes = (lambda f: f in enum) if isinstance(enum, list) \
            else (lambda f: matches(str(pattern), f))
        form = next((f for f in _forms(match["season"].lower(), year) if takes(f)), None)
        if form is not None:
            out.append(Candidate(form, form, "enum" if isinstance(enum, list) else "term",
                                 prior, match.span()))
    return out


def names_a_term(text: str) -> bool:
    """Whether `text` is a season and a year ("fall 2027"): a term, no code of another kind."""
    return _TERM.fullmatch(text.strip()) is not None


def _forms(season: str, year: str) -> list[str]:
    codes = _SEASONS[season]
    return [f for code in codes for f in (f"{year}{code}", f"{code}{year}", f"{code}{year[2:]}",
                                          f"{year[2:]}{code}", f"{year}-{code}", f"{code} {year}",
                                          f"{year} {code}")]
