"""A bound on free string length in a JSON schema, so constrained generation always ends.

A schema string without `maxLength` lets a small model write until the token cap: the answer is
cut off mid-string and fails its schema. `cap_string_lengths` returns a copy of the schema in
which every plain string without a `maxLength` gets `max_chars` (strings with an `enum` or a
`const` are bounded by the author, and are left alone). The caller's schema is never changed,
and the answer is validated against it, not against the copy (`runtime/machine.py`).

A `format` needs more: xgrammar ignores `maxLength` beside one, and an e-mail address, a URI or
a host name has no length of its own, so a small model can fill the token cap inside one
(measured: a request's `requested_by` e-mail field ran for minutes). Formats of a fixed shape
(dates, times, UUIDs, IP addresses) are left alone; an e-mail address becomes a bounded
pattern of the same shape; any other format becomes a capped plain string.

A `pattern` needs the same: xgrammar (0.2.8 and 0.2.9, measured) ignores `maxLength` and
`minLength` beside one, so `[a-z ]*` or `\\w+@\\w+` had no bound. An unbounded pattern is
rewritten by `regex_bounds.bound_pattern` to bounded counts that lose no match of at most the
author's `maxLength` (else `max_chars`) characters; one it cannot rewrite safely (nested
unbounded quantifiers, lookarounds, backreferences, or a bound above 128 characters on
xgrammar 0.2.8, which compiles no larger count) is left as it is, with a logged warning.

The default cap (`DEFAULT_MAX_STRING_CHARS`, 64 characters) is sized for what tool arguments
hold: identifiers, names, e-mail addresses, amounts, dates, short phrases; 64 characters take
about 16-30 tokens of a BPE vocabulary, so a capped field costs at most that many steps.
Longer free text (a message body) needs the schema's own `maxLength`.

>>> cap_string_lengths({"type": "object", "properties": {"name": {"type": "string"}}}, 64)
{'type': 'object', 'properties': {'name': {'type': 'string', 'maxLength': 64}}}
>>> cap_string_lengths({"type": "string", "maxLength": 500}, 64)
{'type': 'string', 'maxLength': 500}
>>> cap_string_lengths({"type": "string", "pattern": "^[a-z]+$"}, 64)
{'type': 'string', 'pattern': '^[a-z]{1,64}$'}
>>> has_string_at_cap({"name": "A" * 64, "tags": ["x"]}, 64)
True
"""

from __future__ import annotations

import importlib.metadata
import logging
import re
from collections.abc import Mapping
from functools import cache
from typing import Any

from stackroute.grammars.regex_bounds import UnboundablePattern, bound_pattern
from stackroute.grammars.schema_walk import rewritten

logger = logging.getLogger(__name__)

DEFAULT_MAX_STRING_CHARS = 64

_SHAPED_KEYS = ("maxLength", "enum", "const", "pattern")
BOUNDED_FORMATS = frozenset({"date", "time", "date-time", "full-date", "full-time", "uuid",
                             "ipv4", "ipv6"})
EMAIL_FORMATS = frozenset({"email", "idn-email"})


def cap_string_lengths(schema: Mapping[str, Any], max_chars: int) -> dict[str, Any]:
    """A deep copy of `schema` with `maxLength: max_chars` on every unbounded plain string."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1; got {max_chars}")
    return rewritten(schema, lambda node: _cap(node, max_chars))


def _cap(node: dict[str, Any], max_chars: int) -> None:
    kind = node.get("type")
    is_string = kind == "string" or (isinstance(kind, list) and "string" in kind)
    fmt = node.get("format")
    if is_string and fmt is not None and not any(k in node for k in _SHAPED_KEYS[1:]):
        limit = node.get("maxLength", max_chars)  # the author's bound, which xgrammar ignores
        if fmt in EMAIL_FORMATS:
            del node["format"]
            node.pop("maxLength", None)
            node["pattern"] = email_pattern(limit)
        elif fmt not in BOUNDED_FORMATS:
            del node["format"]
            node["maxLength"] = limit
    elif is_string and isinstance(node.get("pattern"), str) and not (
            "enum" in node or "const" in node):
        _bound_pattern(node, node.get("maxLength", max_chars))
    elif is_string and not any(key in node for key in _SHAPED_KEYS):
        node["maxLength"] = max_chars


def _bound_pattern(node: dict[str, Any], limit: int) -> None:
    """The node's pattern with bounded counts for values of at most `limit` characters; an
    author's `maxLength` stays beside it (xgrammar ignores it, validation does not)."""
    try:
        node["pattern"] = bound_pattern(node["pattern"], limit,
                                        max_count=max_pattern_count()).pattern
    except UnboundablePattern as e:
        logger.warning("string pattern %r keeps no length bound (generation may run to the "
                       "token cap): %s", node["pattern"], e)


@cache
def max_pattern_count() -> int | None:
    """The largest count in a pattern the installed xgrammar compiles (None: any). 0.2.8,
    vLLM's pin, fails on a count above 128 against a tokenizer ("Check failed:
    per_rule_fsm_hashes", measured on a{129}, a{0,1000}, a{200,300}), and writing a larger
    count as nested ones takes seconds to compile there (7.8 s for a bound of 300); 0.2.9
    compiles {0,300} in 16 ms. Read from the package's metadata: xgrammar is not imported."""
    try:
        version = importlib.metadata.version("xgrammar")
    except importlib.metadata.PackageNotFoundError:
        return None
    numbers = tuple(int(n) for n in re.findall(r"\d+", version)[:3])
    return 128 if numbers < (0, 2, 9) else None


def email_pattern(max_chars: int) -> str:
    r"""An e-mail address of at most about `max_chars` characters: a local part, then two to
    four dot-separated domain labels.

    >>> email_pattern(40)
    '^[A-Za-z0-9._%+-]{1,20}@[A-Za-z0-9-]{1,10}(\\.[A-Za-z0-9-]{1,10}){1,3}$'
    """
    local, label = max(1, max_chars // 2), max(1, max_chars // 4)
    return f"^[A-Za-z0-9._%+-]{{1,{local}}}@[A-Za-z0-9-]{{1,{label}}}" \
           f"(\\.[A-Za-z0-9-]{{1,{label}}}){{1,3}}$"


def has_string_at_cap(value: Any, max_chars: int) -> bool:
    """True when a string value in a parsed JSON answer is `max_chars` long or longer: the
    cap (or a schema `maxLength` equal to it) cut it off. Object keys are not values."""
    if isinstance(value, str):
        return len(value) >= max_chars
    if isinstance(value, dict):
        return any(has_string_at_cap(v, max_chars) for v in value.values())
    if isinstance(value, list):
        return any(has_string_at_cap(v, max_chars) for v in value)
    return False
