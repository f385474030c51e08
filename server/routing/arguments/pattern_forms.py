"""Ids and codes written in another form than the property's pattern takes: in groups ("DE89
3704 0044 0532 0130 00" for an IBAN, "3390 1145 72" for a pattern of dashed groups), in lower
case ("trk-207" for `^TRK-[0-9]{3}$`) or with a group in capitals a pattern takes in lower
case ("CHG-7F3A91C2" for `^CHG-[0-9a-f]{8}$`). Written to be copied, so each is offered as
the pattern writes it, at a literal's prior."""

from __future__ import annotations

import itertools
import re

from stackroute.server.routing.arguments.candidate import Candidate

_MAX_GROUPS = 4  # the groups of an id whose cases are tried one by one (16 forms)
_PLAIN = ("abc", "Abc def", "12345", "AB", "ABCD", "A1", "1")


def pattern_forms(found: list[Candidate], pattern: str, *, prior: float) -> list[Candidate]:
    """The candidates of `found` the pattern refuses as written and takes in another form,
    in that form, at `prior`."""
    return _grouped(found, pattern, prior) + _cased(found, pattern, prior)


def _grouped(found: list[Candidate], pattern: str, prior: float) -> list[Candidate]:
    """A value written in groups, each with a digit ("DE89 3704 0044 0532 0130 00", "4111 1111
    1111 1111", "3390 1145 72"), that the property's pattern takes only without its spaces or
    with dashes for them: written to be copied, as the pattern takes it (the longest such
    run)."""
    out = []
    for c in found:
        groups = c.text.split(" ")
        if c.kind in ("span", "id") and len(groups) > 1 and not matches(pattern, c.text) \
                and all(g.isalnum() and any(ch.isdigit() for ch in g) for g in groups):
            joined = next((j for j in ("".join(groups), "-".join(groups))
                           if matches(pattern, j)), None)
            if joined is not None:
                out.append(Candidate(joined, joined, "id", prior, c.span))
    # the whole value, not its first groups ("DE89 3704 0044 0532" of an IBAN)
    return [c for c in out if not any(o.span != c.span and o.span[0] <= c.span[0]
                                      and c.span[1] <= o.span[1] for o in out)]


def _cased(found: list[Candidate], pattern: str, prior: float) -> list[Candidate]:
    """An id written in another case than the property's pattern takes (words of letters and
    digits, a digit among them): "trk-207" for `^TRK-[0-9]{3}$`, "CHG-7F3A91C2" for
    `^CHG-[0-9a-f]{8}$`, as the pattern writes it: in capitals, in lower case, or each of its
    groups in either. Words without a digit keep their case ("the" is no code)."""
    out = []
    for c in found:
        if c.kind not in ("span", "id") or not any(ch.isdigit() for ch in c.text) \
                or not all(group.replace("-", "").isalnum() for group in c.text.split(" ")) \
                or matches(pattern, c.text):
            continue
        form = next((f for f in _case_forms(c.text) if matches(pattern, f)), None)
        if form is not None:
            out.append(Candidate(form, form, "id", prior, c.span))
    return out


def _case_forms(text: str) -> list[str]:
    """`text` in capitals, in lower case, then with each of its groups of letters and digits
    in either (up to four groups).

    >>> _case_forms("chg-7F")
    ['CHG-7F', 'chg-7f', 'CHG-7f', 'chg-7F']
    """
    parts = re.split(r"([^A-Za-z0-9]+)", text)  # groups, with their separators between
    forms = [text.upper(), text.lower()]
    if len(parts[0::2]) <= _MAX_GROUPS:
        forms += ["".join(cases[k // 2](p) if k % 2 == 0 else p for k, p in enumerate(parts))
                  for cases in itertools.product((str.upper, str.lower),
                                                 repeat=len(parts[0::2]))]
    return list(dict.fromkeys(forms))


def is_structured(pattern: str) -> bool:
    """Whether `pattern` writes an id of its own shape: it takes no word, no phrase, no number
    and no short code ("abc", "Abc def", "12345", "AB", "ABCD", "A1"), as `^POL-[0-9]{7}$`
    or a course code's `^[A-Z]{2,5}[ -][0-9]{3,4}$` do. A span it takes was written to be
    copied."""
    return not any(matches(pattern, t) for t in _PLAIN)


def matches(pattern: str, text: str) -> bool:
    """Whether `pattern` (JSON Schema's: a search, not a full match) takes `text`; a pattern
    Python cannot compile refuses nothing."""
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return True
