"""Arguments from the request: value candidates per property (`candidates.py`, with
`numbers.py` and `dates.py`), and a constrained choice per value (`filling.py`)."""

from stackroute.server.routing.arguments.candidates import Candidate, candidates
from stackroute.server.routing.arguments.filling import ArgumentFiller, FilledArguments
from stackroute.server.routing.arguments.menus import ValueMenus

__all__ = ["ArgumentFiller", "Candidate", "FilledArguments", "ValueMenus", "candidates"]
