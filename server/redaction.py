"""Secrets out of text: the one function every error message and log line passes through
before it leaves the process (API error bodies, log records, stderr).

What it removes: the password of any URL's user-info (`scheme://user:PASSWORD@host`, kept:
the user and the host), and the value of secret-named parameters (`password=`, `api_key=`,
`token=` …) in query strings and libpq key=value strings. A password may contain `@`: the
user-info ends at the *last* `@` of the URL, as URL parsers read it.

>>> redact_secrets("postgresql://app:s3cret@db:5432/stackroute")
'postgresql://app:***@db:5432/stackroute'
>>> redact_secrets("postgresql://:pw@host/db")
'postgresql://:***@host/db'
>>> redact_secrets("postgresql://app:p@ss@db/x")
'postgresql://app:***@db/x'
>>> redact_secrets("postgresql://db/x?user=app&password=s3cret&sslmode=require")
'postgresql://db/x?user=app&password=***&sslmode=require'
>>> redact_secrets("502 from https://svc:Upstr3amT0ken@llm.internal/v1: HTTP 500")
'502 from https://svc:***@llm.internal/v1: HTTP 500'
>>> redact_secrets("host=db user=app password='two words' dbname=x")
'host=db user=app password=*** dbname=x'
>>> redact_secrets("postgresql://u:p/w@db/x?password=a@b")
'postgresql://u:***@db/x?password=***'
>>> redact_secrets("http://127.0.0.1:8000/v1")
'http://127.0.0.1:8000/v1'
"""

from __future__ import annotations

import re

MASK = "***"
# A URL: a scheme, `//` (or a mangled `/`), then everything up to whitespace or a quote or
# bracket that ends it in prose, repr() and JSON (a password with a space is no usable URL).
_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*:/+)(?P<rest>[^\s'\"<>`\\]+)")
_SECRET_NAMES = r"password|passwd|pwd|sslpassword|secret|token|access_token|api[_-]?key"
# `name=value` in a query string (ends at `&` or `#`) or a libpq conninfo (ends at a space;
# a quoted value ends at its closing quote).
_PARAM = re.compile(rf"(?i)(?P<name>\b(?:{_SECRET_NAMES}))=(?P<value>'(?:[^'\\]|\\.)*'?|"
                    r"[^\s&#'\"]*)")


def redact_secrets(text: str) -> str:
    """`text` with every URL password and secret-named parameter value replaced by `***`."""
    if not text:
        return text
    return _PARAM.sub(_mask_param, _URL.sub(_mask_userinfo, text))


def redact_url(url: str) -> str:
    """A URL (or a conninfo string) fit for a log line or an error message."""
    return redact_secrets(url)


def _mask_userinfo(match: re.Match[str]) -> str:
    scheme, rest = match.group("scheme"), match.group("rest")
    # The user-info ends at the last `@` before the query: a password may hold `@` (or `/`,
    # unencoded), a query value may hold `@` too.
    at = rest.rfind("@", 0, min((i for i in (rest.find("?"), rest.find("#")) if i >= 0),
                                default=len(rest)))
    if at < 0:
        return match.group(0)
    userinfo, host = rest[:at], rest[at + 1:]
    user, colon, _password = userinfo.partition(":")
    if not colon:  # a user name only: nothing secret (`postgresql://app@db/x`)
        return match.group(0)
    return f"{scheme}{user}:{MASK}@{host}"


def _mask_param(match: re.Match[str]) -> str:
    return f"{match.group('name')}={MASK}" if match.group("value") else match.group(0)
