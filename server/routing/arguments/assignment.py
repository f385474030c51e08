"""Which property each of the request's values goes to: a stable assignment by prior.

Taking each property's best candidate in schema order lets the first property take a value
that fits a later one better ("the supply chain risk for the electronics industry in China":
`supply_chain` takes the name "China", and `country` is left "electronics"). One piece of the
request is one value, and it goes to the property whose prior for it is highest (the earlier
property on a tie); the property it leaves takes its next best. This is a stable matching
(properties propose in order of prior, a value keeps the better claim), not the highest sum
of priors: a sum is won by splitting a name over two properties ("Lionel" and "Messi") rather
than giving one of them a weak value. A required property whose every candidate is claimed
takes its best anyway (a value may serve two properties); an optional one stays out (NONE),
as it does where its best remaining candidate's prior is below zero."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stackroute.server.routing.arguments.candidates import Candidate
from stackroute.server.routing.arguments.meaning import ValueMeaning
from stackroute.server.routing.arguments.support import offered


def clashes(a: Candidate, b: Candidate) -> bool:
    """Whether two values are the same words of the request: overlapping places where both
    have one (a word the request says twice can be two values), else the same text."""
    if a.span is not None and b.span is not None:
        return a.span[0] < b.span[1] and b.span[0] < a.span[1]
    return a.text == b.text


def assign_values(menus: Sequence[Sequence[Candidate]],
                  optional: Sequence[bool]) -> list[Candidate | None]:
    """One candidate (None: left out, optional properties only) per menu; each menu sorted by
    prior, highest first."""
    held: dict[int, Candidate] = {}
    left_out: set[int] = set()
    tried = [0] * len(menus)
    free = list(range(len(menus)))
    while free:
        k = free.pop(0)
        menu = menus[k]
        if tried[k] >= len(menu):  # every candidate claimed by a better fit
            if optional[k] or not menu:
                left_out.add(k)
            else:
                held[k] = menu[0]  # reused: nothing of its own is left
            continue
        candidate = menu[tried[k]]
        tried[k] += 1
        if optional[k] and candidate.prior < 0:
            left_out.add(k)
            continue
        rivals = [r for r, c in held.items() if clashes(c, candidate)]
        if all(candidate.prior > held[r].prior or (candidate.prior == held[r].prior and k < r)
               for r in rivals):
            for r in rivals:
                del held[r]
                free.append(r)
            held[k] = candidate
        else:
            free.insert(0, k)
    return [held.get(k) for k in range(len(menus))]


@dataclass(frozen=True)
class Pick:
    """One property's value by the assignment."""

    candidate: Candidate | None  # None: the optional property stays out


def assigned_picks(menus: Mapping[str, list[Candidate]], required: list[str],
                   properties: Mapping[str, Any], request: str, *,
                   meaning: ValueMeaning | None = None) -> dict[str, Pick]:
    """Each property's value by the stable assignment of the priors (`assign_values`):
    the required properties first, then the optional ones the request supports, from the
    values left (an optional property never takes a required one's value)."""
    must = [n for n in required if menus[n]]
    picks = {n: Pick(c) for n, c in zip(
        must, assign_values([menus[n] for n in must], [False] * len(must)), strict=True)}
    taken = [p.candidate for p in picks.values() if p.candidate is not None]
    left = {n: [c for c in found if not any(clashes(c, t) for t in taken)]
            for n, found in menus.items() if n not in required and found}
    offers = {n: offered(n, properties, found, request, set(), meaning).candidates
              for n, found in left.items()}
    may = [n for n, found in offers.items() if found]
    picks |= {n: Pick(c) for n, c in zip(
        may, assign_values([offers[n] for n in may], [True] * len(may)), strict=True)}
    return picks
