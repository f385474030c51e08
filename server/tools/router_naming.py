"""Names and descriptions for the routers of a built tree, from their members.

A router's topic words are its members' most distinctive words: frequent among its own leaves,
rare among its parent's (score = share of the group's leaves that use the word × log(1 + parent
leaves / parent leaves that use it)). The name is the top two joined (`weather_forecast`), or,
given an engine, the model's answer under a short snake-case pattern, falling back to the
words when the answer is taken by a sibling or reserved. Descriptions list the topic words and
the members, so the routing model sees what is inside.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from stackroute.runtime.catalog import RESERVED_NAMES
from stackroute.runtime.messages import Message
from stackroute.runtime.prompt import Prompt
from stackroute.server.embeddings.words import (
    GENERIC_TOOL_WORDS,
    STOP_WORDS,
    split_name,
    stem,
    text_words,
)
from stackroute.server.engines.base import Constraint, Engine, SamplingOptions

log = logging.getLogger(__name__)

ROUTER_NAME_PATTERN = r"[a-z][a-z0-9_]{2,30}"
MAX_DESCRIPTION_CHARS = 280  # under the prompt layout's 300-character clip
NAMING_SYSTEM = ("You name groups of tools in a catalog. Answer with one short snake_case name "
                 "(one to three lower-case words joined by underscores) that says what the "
                 "group's tools are about, and nothing else.")


class WordStats:
    """Each leaf's set of word stems, and the commonest spelling of each stem."""

    def __init__(self, leaves: Sequence[Mapping[str, Any]]) -> None:
        spellings: dict[str, Counter[str]] = {}
        self.stems: list[frozenset[str]] = []
        for leaf in leaves:
            words = [w for w in (*split_name(str(leaf.get("name", ""))),
                                 *text_words(str(leaf.get("description", ""))))
                     if len(w) > 2 and w[0].isalpha() and w not in GENERIC_TOOL_WORDS
                     and w not in STOP_WORDS]
            stems = set()
            for w in words:
                s = stem(w)
                stems.add(s)
                spellings.setdefault(s, Counter())[w] += 1
            self.stems.append(frozenset(stems))
        self.spelling = {s: c.most_common(1)[0][0] for s, c in spellings.items()}

    def document_counts(self, items: Sequence[int]) -> Counter[str]:
        counts: Counter[str] = Counter()
        for i in items:
            counts.update(self.stems[i])
        return counts

    def topic_words(self, items: Sequence[int], parent_counts: Counter[str], num_parent: int,
                    *, limit: int = 6) -> list[str]:
        """The group's most distinctive words (spelled as its leaves spell them), best first."""
        own = self.document_counts(items)
        scored = sorted(
            ((n / len(items)) * math.log(1 + num_parent / max(parent_counts[s], n)), s)
            for s, n in own.items())
        ranked = sorted(scored, key=lambda t: (-t[0], t[1]))
        return [self.spelling[s] for _, s in ranked[:limit]]


def name_from_words(words: Sequence[str], taken: set[str]) -> str:
    """A snake-case name from the best topic words, not in `taken` (lower-cased names).

    >>> name_from_words(["weather", "forecast", "wind"], {"weather_forecast"})
    'weather'
    >>> name_from_words([], set())
    'group'
    """
    words = [w for w in words if re.fullmatch(r"[a-z][a-z0-9]*", w)] or ["group"]
    candidates = [words[:2], words[:1], [words[0], *words[2:3]], words[1:3], words[:3]]
    for parts in candidates:
        name = _clip_name("_".join(parts))
        if _is_free(name, taken):
            return name
    base = _clip_name("_".join(words[:2]), reserve=3)
    return next(f"{base}_{i}" for i in range(2, 10_000) if _is_free(f"{base}_{i}", taken))


def model_name(engine: Engine, member_lines: Sequence[str], topics: Sequence[str],
               taken: set[str]) -> str | None:
    """The model's name for a group, under `ROUTER_NAME_PATTERN`; None when the answer is
    unusable (a sibling's name, a completion state, cut off)."""
    lines = "\n".join(f"- {line}" for line in member_lines[:12])
    more = f"\n(and {len(member_lines) - 12} more)" if len(member_lines) > 12 else ""
    words = f"\nWords that set this group apart: {', '.join(topics[:6])}." if topics else ""
    avoid = f"\nNames already used at this level: {', '.join(sorted(taken))}." if taken else ""
    prompt = Prompt((Message("system", NAMING_SYSTEM),
                     Message("user", f"The tools in this group:\n{lines}{more}{words}{avoid}\n"
                                     "Name for this group:")))
    generation = engine.generate(prompt, constraint=Constraint.regex(ROUTER_NAME_PATTERN),
                                 sampling=SamplingOptions(max_tokens=12))
    name = generation.text.strip().strip("_")
    if (generation.finish_reason != "stop" or not re.fullmatch(ROUTER_NAME_PATTERN, name)
            or "__" in name or not _is_free(name, taken)):
        log.debug("model name %r unusable; falling back to topic words", generation.text)
        return None
    return name


def describe_router(topics: Sequence[str], member_names: Sequence[str], num_leaves: int, *,
                    is_leaf_level: bool) -> str:
    """"Weather, forecast and wind. Tools: getWeather, getForecast, … (+3 more)."

    >>> describe_router(["weather", "wind"], ["getWeather", "getWind"], 2, is_leaf_level=True)
    'Weather and wind. Tools: getWeather, getWind.'
    """
    head = _join_words(list(topics[:5])).capitalize() + "." if topics else ""
    label = "Tools" if is_leaf_level else f"{num_leaves} tools in groups"
    text = f"{head} {label}: ".lstrip()
    shown: list[str] = []
    for name in member_names:
        rest = len(member_names) - len(shown) - 1
        suffix = f", … (+{rest} more)." if rest else "."
        if shown and len(text) + len(", ".join([*shown, name])) + len(suffix) > \
                MAX_DESCRIPTION_CHARS:
            break
        shown.append(name)
    rest = len(member_names) - len(shown)
    return text + ", ".join(shown) + (f", … (+{rest} more)." if rest else ".")


def _join_words(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _clip_name(name: str, *, reserve: int = 0) -> str:
    return name[:31 - reserve].rstrip("_")


def _is_free(name: str, taken: set[str]) -> bool:
    return len(name) >= 3 and name not in taken and name.upper() not in RESERVED_NAMES
