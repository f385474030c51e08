"""Abbreviations a request writes for a catalog's words: "odo" for odometer, "rpt" for report,
"tkt" for ticket, "appt" for appointment, "mgmt" for management.

Staff type into a tool in shorthand, and shorthand meets neither BM25 (no catalog text holds
"rpt") nor the embedding (the model's tokenizer cuts "rpt" into pieces that mean nothing).
A request word is read as an abbreviation only where it is no word: not in the catalog's
words, and not a whole word of a dictionary (the embedding model's WordPiece vocabulary, which
holds 21,722 whole words: "car" and "van" are words, "rpt" and "odo" are not), of three to
eight letters, not in capitals (an acronym: "PNR", "URL"), and not inside a file name, a web
address or an id. It abbreviates a catalog word that

- begins with it, where it has three letters or more ("odo": odometer, "resched": reschedule);
- or, written without vowels after its first letter, holds its first letter and then its
  consonants in order, skipping at most one between two it keeps ("rpt": report, "qty":
  quantity), to the word's last consonant or, for four letters or more, short of it ("appt":
  appointment); a word it abbreviates to the last consonant is read over one it does not
  ("acct": account, not activity).

A word that abbreviates more than MAX_EXPANSIONS catalog words says none of them. Without a
dictionary nothing is read as an abbreviation (a test double's embedder has none).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from stackroute.server.embeddings.lexical import STOP_WORDS
from stackroute.server.embeddings.words import singular

MAX_EXPANSIONS = 3
_VOWELS = frozenset("aeiou")  # "y" is a consonant: "qty" for quantity
# a word of a file name, a web address or an id ("photo1.jpg", "wo-2031") is not shorthand
_WORD = re.compile(r"(?<![\w'./@#-])[A-Za-z]{2,8}(?![\w'/@-]|\.\w)")


@dataclass(frozen=True)
class Abbreviations:
    """The abbreviations of one catalog's words: request word -> the catalog words it stands
    for, read once per word."""

    catalog_words: frozenset[str]  # lower-case alphabetic words of the catalog's leaf texts
    dictionary: frozenset[str]  # lower-case whole words a request may write as themselves

    @classmethod
    def of(cls, catalog_words: Iterable[str], dictionary: Collection[str]) -> Abbreviations:
        return cls(frozenset(w for w in catalog_words
                             if w.isalpha() and len(w) > 3 and w not in STOP_WORDS),
                   frozenset(dictionary))

    def expansions(self, word: str) -> tuple[str, ...]:
        """The catalog words `word` abbreviates, in alphabetical order; () for a word.

        >>> a = Abbreviations.of(["odometer", "report", "receipt", "vehicle"], ["car", "van"])
        >>> a.expansions("odo"), a.expansions("rpt"), a.expansions("car"), a.expansions("veh")
        (('odometer',), ('receipt', 'report'), (), ('vehicle',))
        >>> a.expansions("ODO"), a.expand("report.rpt, rpt")  # capitals: an acronym
        ((), 'report.rpt, receipt report')
        """
        w = word.lower()
        if not _no_word(word, self.dictionary) \
                or w in self.catalog_words or singular(w) in self.catalog_words:
            return ()
        found = [(v, strict) for v in self.catalog_words if len(v) >= len(w) + 2
                 for strict in (_abbreviates(w, v),) if strict is not None]
        if any(strict for _, strict in found):  # "acct": account, not activity
            found = [(v, strict) for v, strict in found if strict]
        return tuple(sorted(v for v, _ in found)) if len(found) <= MAX_EXPANSIONS else ()

    def expand(self, text: str) -> str:
        """`text` with each abbreviation written as the catalog words it stands for (the
        evidence reads those; the abbreviation itself would only count against every leaf);
        `text` unchanged where it holds none.

        >>> a = Abbreviations.of(["odometer", "update", "vehicle"], ["van", "mi"])
        >>> a.expand("van 12 odo 48,210 mi")
        'van 12 odometer 48,210 mi'
        """
        return _WORD.sub(lambda m: " ".join(self.expansions(m[0])) or m[0], text)


def _abbreviates(short: str, word: str) -> bool | None:
    """Whether `short` abbreviates `word`, and how surely: True where it is its first letters
    (three or more), or its first letter and then its consonants, doubled ones once
    ("password": p s w r d), in order, skipping at most one between two it keeps, to its last
    ("rpt": r p (r) t, "tkt": t (c) k t, "pwd": p (s) w (r) d; "hrs" is not "harsh");
    False where a word of four letters or more ends before ("appt": a p (n) t…); None where
    it does not."""
    if word.startswith(short):
        return True if len(short) >= 3 else None
    if len(short) < 3 or short[0] != word[0] or any(c in _VOWELS for c in short[1:]):
        return None
    consonants = _once([c for c in word[1:] if c not in _VOWELS])
    at = -1
    for c in _once(list(short[1:])):
        found = [i for i in (at + 1, at + 2) if i < len(consonants) and consonants[i] == c]
        if not found:
            return None
        at = found[0]
    if at == len(consonants) - 1:
        return True
    return False if len(short) >= 4 else None


def _once(letters: list[str]) -> list[str]:
    return [c for i, c in enumerate(letters) if i == 0 or c != letters[i - 1]]


def is_shorthand(written: str, word: str, dictionary: Collection[str] | None = None) -> bool:
    """Whether a request's `written` word is shorthand for `word` (a property's or an enum
    value's word): `_no_word`, at least two letters shorter, and `_abbreviates` it to its
    last consonant (one word alone, no catalog's words to rank it against: "acct" is no
    shorthand for actual); `dictionary`: the default embedding model's words where None.

    >>> is_shorthand("odo", "odometer"), is_shorthand("qty", "qUantity")
    (True, True)
    >>> pairs = [("the", "theme"), ("QTY", "quantity"), ("acct", "actual")]
    >>> [is_shorthand(written, word) for written, word in pairs]
    [False, False, False]
    """
    w = word.lower()
    return _no_word(written, default_dictionary() if dictionary is None else dictionary) \
        and len(w) >= len(written) + 2 and _abbreviates(written.lower(), w) is True


def _no_word(written: str, dictionary: Collection[str]) -> bool:
    """Whether `written` can be shorthand: three to eight letters, not in capitals (an
    acronym), and no whole word of a `dictionary` (none: nothing is shorthand)."""
    w = written.lower()
    return bool(dictionary) and w.isalpha() and 3 <= len(w) <= 8 and not written.isupper() \
        and w not in dictionary and singular(w) not in dictionary


@functools.cache
def default_dictionary() -> frozenset[str]:
    """`dictionary_of` the default embedding model's vocabulary, read from its package's
    `vocab.txt` (no model loaded); empty where the package or the file is missing."""
    from stackroute.runtime.errors import InputError
    from stackroute.server.embeddings.embedder import default_embedding_model_dir

    try:
        vocab = default_embedding_model_dir() / "vocab.txt"
        return dictionary_of(vocab.read_text(encoding="utf-8").split("\n"))
    except (InputError, OSError):
        return frozenset()


def dictionary_of(vocabulary: Mapping[str, int] | Collection[str]) -> frozenset[str]:
    """The whole words of a WordPiece vocabulary: alphabetic entries, not word pieces ("##s")
    and not single letters.

    >>> sorted(dictionary_of({"car": 1, "##s": 2, "[CLS]": 3, "a": 4, "van": 5}))
    ['car', 'van']
    """
    return frozenset(w for w in vocabulary if len(w) > 1 and w.isalpha() and w.islower())
