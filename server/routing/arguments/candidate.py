"""One value a property may take: what the request holds, and how plausible it is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Candidate:
    value: Any  # the JSON value the argument takes
    text: str  # the option the model chooses (unique per property)
    kind: str  # number | date | time | enum | email | phone | id | quoted | reason | literal | span
    #            | boolean | list | country | currency | region | term
    prior: float = 0.0  # logit bias for the constrained choice
    span: tuple[int, int] | None = None  # where the request holds it (None: not literally)
