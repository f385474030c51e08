"""The words of capability names and descriptions: split, lower-cased, stop words dropped,
crudely stemmed. Shared by the taxonomy checks (near-duplicate names), the tree builder
(router names from their members' most distinctive words) and the abstention check's name
share (`lexical.name_share`)."""

from __future__ import annotations

import re
from collections.abc import Iterable

# Words that say nothing about what a capability does.
STOP_WORDS = frozenset((
    "a", "about", "all", "an", "and", "any", "are", "as", "at", "be", "by", "can", "each",
    "for", "from", "given", "in", "into", "is", "it", "its", "new", "of", "on", "one", "or",
    "other", "so", "specific", "such", "that", "the", "their", "them", "these", "this", "to",
    "up", "using", "via", "with", "within", "you", "your",
))
# Verbs and nouns most tool descriptions share ("Retrieve information about …"): useless for
# telling groups apart, so router names skip them.
GENERIC_TOOL_WORDS = frozenset((
    "add", "analyze", "based", "calculate", "certain", "check", "create", "current", "data",
    "delete", "detail", "details", "existing", "get", "info", "information", "list", "manage",
    "particular", "perform", "provide", "provided", "related", "remove", "retrieve", "search",
    "set", "specified", "tool", "tools", "update", "value", "various",
))
_ALNUM = re.compile(r"[^\W_]+")  # runs of letters and digits, in any script


def split_name(name: str) -> list[str]:
    """The lower-case words of an identifier or a text: split at anything not a letter or a
    digit, at camelCase, after an acronym ("ECGSample"), and between letters and digits.
    Every layer that reads a tool's or a property's name in words calls this, so the
    evidence, BM25, the judge's prompt and the value cues see the same words.

    >>> split_name("getPM2_5Level")
    ['get', 'pm', '2', '5', 'level']
    >>> split_name("getECGSample"), split_name("Travel_and_Tourism")
    (['get', 'ecg', 'sample'], ['travel', 'and', 'tourism'])
    >>> split_name("créerFactureTVA"), split_name("iOS-app.v2")
    (['créer', 'facture', 'tva'], ['i', 'os', 'app', 'v', '2'])
    """
    words = []
    for run in _ALNUM.findall(name):
        start = 0
        for i in range(1, len(run)):
            before, here = run[i - 1], run[i]
            after = run[i + 1] if i + 1 < len(run) else ""
            if (before.isdigit() != here.isdigit()
                    or (here.isupper() and not before.isupper())
                    or (before.isupper() and here.isupper() and after.islower())):
                words.append(run[start:i])
                start = i
        words.append(run[start:])
    return [w.lower() for w in words]


def name_words(name: str) -> str:
    """`split_name`'s words joined by spaces: a name as a sentence says it.

    >>> name_words("getWaterQuality"), name_words("payee_name")
    ('get water quality', 'payee name')
    """
    return " ".join(split_name(name))


def text_words(text: str) -> list[str]:
    """Lower-case alphabetic words of free text, stop words dropped, in order.

    >>> text_words("Retrieve the score of a basketball game")
    ['retrieve', 'score', 'basketball', 'game']
    """
    return [w for w in re.findall(r"[a-z][a-z0-9]*", text.lower()) if w not in STOP_WORDS]


def singular(word: str) -> str:
    """A plural folded to its singular, nothing else (BM25's tokens, a number's unit).

    >>> [singular(w) for w in ("payments", "studies", "days", "class", "bus")]
    ['payment', 'study', 'day', 'class', 'bus']
    """
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def stem(word: str) -> str:
    """A crude stem: enough to equate plural and adjective forms of a domain word.

    >>> [stem(w) for w in ("communications", "environmental", "analytics", "studies")]
    ['communication', 'environment', 'analytic', 'study']
    """
    if len(word) > 5 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    if len(word) > 8 and word.endswith("al"):
        word = word[:-2]
    return word


def name_tokens(name: str, *, drop: Iterable[str] = ()) -> tuple[str, ...]:
    """Stemmed content words of a name, without stop words and without the words in `drop`
    (a parent's own words, which every child repeats).

    >>> name_tokens("Travel_and_Tourism")
    ('travel', 'tourism')
    """
    dropped = {stem(w) for w in drop}
    return tuple(t for t in (stem(w) for w in split_name(name) if w not in STOP_WORDS)
                 if t not in dropped)


def topic_text(name: str, description: str) -> str:
    """What a tool is about, without the verbs and fillers every tool shares (so embeddings
    group tools by domain rather than by "Retrieve the current …" phrasing).

    >>> topic_text("getBasketballScore", "Retrieve the score of a basketball game")
    'basketball score game'
    """
    words = [w for w in (*split_name(name), *text_words(description))
             if w not in GENERIC_TOOL_WORDS and w not in STOP_WORDS and w[0].isalpha()]
    return " ".join(dict.fromkeys(words))
