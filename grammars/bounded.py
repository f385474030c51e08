"""The schema an engine constrains generation with: the caller's JSON schema with every way
to write forever taken away.

First the combinators xgrammar reads apart from their parent are rewritten (`combinators.py`:
an `allOf` of several schemas merged, an `anyOf` beside other keywords given them). Then three
rewrites, each on a copy and each leaving an author's own bound alone: `container_caps.py`
(arrays and open objects get a count of items, open values become scalars), then
`string_caps.py` (strings, formats and patterns get a length; skipped when the engine's cap is
None) and `number_caps.py` (numbers get 15 digits). The order matters: the scalars the first
inserts are bounded by the other two. Answers are validated against the caller's schema, never
this one.

>>> bounded_schema({"type": "array"}, 8)["items"]["anyOf"][0]
{'type': 'string', 'maxLength': 8}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stackroute.grammars.combinators import distributed
from stackroute.grammars.container_caps import cap_container_sizes
from stackroute.grammars.number_caps import cap_number_sizes
from stackroute.grammars.string_caps import cap_string_lengths


def bounded_schema(schema: Mapping[str, Any], max_string_chars: int | None) -> dict[str, Any]:
    """`schema` with its containers, strings (unless `max_string_chars` is None) and numbers
    bounded."""
    bounded = cap_container_sizes(distributed(schema))
    if max_string_chars is not None:
        bounded = cap_string_lengths(bounded, max_string_chars)
    return cap_number_sizes(bounded)
