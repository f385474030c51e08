"""Text a person reads before approving a call, shown as it is: characters that change how
text looks without being seen (bidi overrides such as U+202E, zero-width and other format
characters, controls, line and paragraph separators, unpaired surrogates, private-use and
unassigned code points) are written as `\\uXXXX` escapes. A gate's arguments with a
right-to-left override could otherwise show `{"payee": "Asha"}` for a different payee.

>>> shown_json({"payee": "Asha\\u202e01\\u202c", "note": "a\\u200bb"})
'{\\n  "payee": "Asha\\\\u202e01\\\\u202c",\\n  "note": "a\\\\u200bb"\\n}'
>>> shown_json({"city": "Zürich 👋"})
'{\\n  "city": "Zürich 👋"\\n}'
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

# Categories escaped: Cc control, Cf format (bidi, zero-width), Cs surrogate, Co private use,
# Cn unassigned, Zl/Zp line and paragraph separators.
_HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def escape_hidden(text: str) -> str:
    """`text` with every character of the categories above written as `\\uXXXX` (or
    `\\U00XXXXXX` past the BMP)."""
    return _CANDIDATE.sub(_escape, text)


def shown_json(value: Any) -> str:
    """`value` as indented JSON whose strings show every hidden character as an escape (the
    JSON's own line breaks stay: inside strings, json.dumps has escaped them already)."""
    text = json.dumps(value, ensure_ascii=False, indent=2, default=str)
    return "\n".join(escape_hidden(line) for line in text.split("\n"))


# Anything but printable ASCII is a candidate; its Unicode category decides.
_CANDIDATE = re.compile(r"[^\x20-\x7e]")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if unicodedata.category(char) not in _HIDDEN_CATEGORIES:
        return char
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"
