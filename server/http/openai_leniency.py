"""Lenient by default, strict on request: the fields of an OpenAI-style request this server
does not implement.

Clients send fields a local server has no use for (`logit_bias`, `service_tier`, a penalty,
a provider's extension). By default each one is ignored, named in a logged warning and in the
`X-Stackroute-Ignored-Fields` response header; with the `strict_openai` setting the request
is refused with a 400 naming them (`unsupported_field`), as before.

>>> from stackroute.server.http.openai_schemas import ChatCompletionRequest
>>> body = ChatCompletionRequest.model_validate(
...     {"messages": [{"role": "user", "content": "hi", "x": 1}], "logit_bias": {}})
>>> ignored_fields(body)
['logit_bias', 'messages.0.x']
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from stackroute.server.http.errors import UnsupportedFieldError, unsupported_fields_message

log = logging.getLogger(__name__)

IGNORED_FIELDS_HEADER = "X-Stackroute-Ignored-Fields"
MAX_NAMES = 20  # names in the header; the log has them all
MAX_NAME_CHARS = 100
_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]")
# Known fields whose non-default values this server does not implement: ignored (or refused).
_ZERO_ONLY = ("frequency_penalty", "presence_penalty")


def ignored_fields(body: BaseModel) -> list[str]:
    """Every field of `body` this server ignores, as dotted paths, in request order."""
    names = list(_unknown(body, ""))
    names += [name for name in _ZERO_ONLY if getattr(body, name, None)]
    return names


def judge(body: BaseModel, *, is_strict: bool, request_id: str | None) -> list[str]:
    """The fields to name in the response header; raises `UnsupportedFieldError` (400)
    for any when `is_strict`."""
    names = ignored_fields(body)
    if names and is_strict:
        raise UnsupportedFieldError(unsupported_fields_message(names), param=names[0])
    if names:
        log.warning("ignored request field(s): %s", ", ".join(names),
                    extra={"request_id": request_id, "ignored_fields": names})
    return names


def header_of(names: list[str]) -> dict[str, str]:
    """The response header naming `names` (none when nothing was ignored): the client's own
    key names, so anything but name characters is written `?`, and the list is bounded.

    >>> header_of(["logit_bias", "x\\r\\nSet-Cookie: a"])
    {'X-Stackroute-Ignored-Fields': 'logit_bias, x??Set-Cookie??a'}
    """
    if not names:
        return {}
    shown = [_UNSAFE.sub("?", name)[:MAX_NAME_CHARS] for name in names[:MAX_NAMES]]
    # ASCII only: a header value must encode as latin-1 (a "…" here was a 500)
    more = f", ... ({len(names) - MAX_NAMES} more)" if len(names) > MAX_NAMES else ""
    return {IGNORED_FIELDS_HEADER: ", ".join(shown) + more}


def _unknown(value: Any, prefix: str) -> Iterator[str]:
    if isinstance(value, BaseModel):
        for key in value.model_extra or {}:
            yield f"{prefix}{key}"
        for name in type(value).model_fields:
            yield from _unknown(getattr(value, name), f"{prefix}{name}.")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _unknown(item, f"{prefix}{i}.")
