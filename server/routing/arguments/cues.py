"""Where a request names a property: the property's own words, where the request says them,
and whether a value stands next to one ("with ID X", "the Sales team")."""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Collection, Mapping
from typing import Any, NamedTuple

from stackroute.server.embeddings.abbreviations import is_shorthand
from stackroute.server.embeddings.words import split_name
from stackroute.server.routing.arguments.money import MONEY_WORD

STOPWORDS = frozenset("""a an the of to in on at for from by with and or but is are be as
into about than then that this these those it its my me i you your we our please can could
would will shall should do does did get give show tell find set make let up out over under all
any some what which who whom whose where when how if via per using use there here also not
was were been being has have had may might must they them their he she him her his us am
whether while because""".split())  # noqa: SIM905
# a single quote opens where no letter or digit stands before it and closes where none
# follows: an apostrophe ("name's", "I'm") quotes nothing
QUOTED = re.compile(r"\"([^\"]*)\"?|(?<!\w)'((?:[^']|'\w)*)'(?!\w)|“([^”]*)”")
# between a value and its property's name after it: nothing ("the Sales team"), "as"
# ("PayPal as your payment method"), or an amount's currency word ("a 2,500 dollar deductible")
LABELS_BEFORE = re.compile(rf"(?:as(?: (?:the|your|a|an|my|our))?|{MONEY_WORD.pattern})?")
# a place preposition between a property's name and a name after it: the name says where
# ("a facial treatment at Tranquil Wellness Center", "jobs in Berlin"), not the value
_WHERE = frozenset(("at", "in", "near", "from", "within", "around", "inside"))
# a sentence's end between a label and a value (not an abbreviation's period: "ID no. 5")
_SENTENCE_END = re.compile(r"[.!?]\s+(?=[A-Z])|[!?;]")
# words between a property's name and its value: "named X", "ID no. 5", "located at /a/b"
_CONNECTORS = frozenset(("is", "named", "called", "id", "number", "no", "#", "located", "found",
                         "stored", "hosted", "saved", "available"))


def property_words(name: str, schema: Mapping[str, Any]) -> list[str]:
    """The property's own words: its name split at _ and camelCase (lower case)."""
    return [w for w in split_name(name) if w not in STOPWORDS]


@functools.lru_cache(maxsize=4096)  # every property's candidates ask it of every sibling
def joined_forms(name: str) -> frozenset[str]:
    """The property's name as one word, as a request may write it: each pair of its adjacent
    words joined ("checkout" of new_check_out) and each of its words of five letters or more,
    which a request may split ("pickup" of pickup_date said "pick up").

    >>> sorted(joined_forms("new_check_out")), sorted(joined_forms("pickup_date"))
    (['check', 'checkout', 'newcheck'], ['pickup', 'pickupdate'])
    """
    parts = split_name(name)
    return frozenset({a + b for a, b in itertools.pairwise(parts) if len(a + b) >= 5}
                     | {p for p in parts if len(p) >= 5})


class Naming(NamedTuple):
    """How a request names one property among its siblings (`cue_positions`' arguments)."""

    words: list[str]  # its words no sibling shares (all of them where it shares every one)
    joined: frozenset[str]  # its name as one word, where no sibling's is that word
    unless: frozenset[str]  # a sibling's name as one word, where this one's is not


def own_naming(name: str, words: list[str], siblings: Collection[str]) -> Naming:
    """The words and one-word forms that name property `name` (its `words`) and no sibling.

    >>> own_naming("new_check_out", ["new", "check", "out"], ["new_check_in"]).joined
    frozenset({'checkout'})
    """
    shared = {w for s in siblings for w in property_words(s, {})}
    forms = joined_forms(name)
    theirs = frozenset().union(*(joined_forms(s) for s in siblings))
    return Naming([w for w in words if w not in shared] or words, forms - theirs, theirs - forms)


def phrase_positions(request: str, name: str) -> list[tuple[int, int]]:
    """Where the request says a name made of function words only, as one phrase ("as of" for
    `as_of`, whose words `property_words` leaves none of); none for any other name.

    >>> phrase_positions("the ledger as of November 30", "as_of")
    [(11, 16)]
    """
    parts = split_name(name)
    if not parts or any(p not in STOPWORDS for p in parts):
        return []
    phrase = r"[\s_-]+".join(map(re.escape, parts))
    return [m.span() for m in re.finditer(rf"\b{phrase}\b", request, re.IGNORECASE)]


def cue_positions(request: str, words: list[str], *, joined: Collection[str] = (),
                  unless: Collection[str] = ()) -> list[tuple[int, int]]:
    """Where the request names the property (a word of its name, 4-letter stem, or its
    shorthand: "odo 48,210" for odometer_reading, `abbreviations.is_shorthand`; or, `joined`,
    its name written as one word, said as one word or two: "checkout", "check-out", "check
    out"): each such word's span, so a value right after it ("with ID X", "age of 63") or right
    before it ("the Sales team", "the 'income' dataset") can be favoured. A word, or two, that
    say one of `unless` (another property's name as one word: "checkout" beside
    new_check_in) name no word of this one's."""
    tokens = list(re.finditer(r"[A-Za-z]+", request))
    pairs = [(a, b) for a, b in itertools.pairwise(tokens)
             if request[a.end():b.start()] in (" ", "-")]
    taken = {m.start() for m in tokens if m[0].lower() in unless}
    taken |= {m.start() for a, b in pairs if (a[0] + b[0]).lower() in unless for m in (a, b)}
    out = [(a.start(), b.end()) for a, b in pairs if (a[0] + b[0]).lower() in joined
           and a.start() not in taken]
    paired = {m.start() for a, b in pairs if (a.start(), b.end()) in out for m in (a, b)}
    for match in tokens:
        word = match[0].lower()
        if match.start() in taken or match.start() in paired:
            continue
        if word in joined or any(len(w) >= 2 and (word == w or (len(w) >= 4 and word[:4] == w[:4])
                                                  or is_shorthand(match[0], w))
                                 for w in words):
            out.append(match.span())
    return sorted(out)


def label_positions(request: str, words: list[str], own: list[str], *,
                    joined: Collection[str] = (),
                    unless: Collection[str] = ()) -> list[tuple[int, int]]:
    """`cue_positions` of `words`, each run on over the property's `own` words right beside
    it, after and before: where `words` leaves out a word the siblings share ("content" of
    fat_content and protein_content), "fat content of 13.1%" still labels 13.1 ("fat content"
    is the label, not "fat" with "content" between it and the value), and "soil as the slope
    material" labels soil. `joined`, `unless`: as `cue_positions`'.

    >>> request = "a fat content of 13.1%"
    >>> [request[a:b] for a, b in label_positions(request, ["fat"], ["fat", "content"])]
    ['fat content']
    >>> request = "soil as the slope material"
    >>> [request[a:b] for a, b in label_positions(request, ["material"], ["slope", "material"])]
    ['slope material']
    """
    spans = cue_positions(request, words, joined=joined, unless=unless)
    if not spans or own == words:
        return spans
    owned = cue_positions(request, own)
    out = []
    for start, end in spans:
        for a, b in owned:
            if a >= end and not request[end:a].strip(" -_"):
                end = b
        for a, b in reversed(owned):
            if b <= start and not request[b:start].strip(" -_"):
                start = a
        out.append((start, end))
    return out


def near(span: tuple[int, int], cues: list[tuple[int, int]], request: str, *,
         before: bool = False) -> bool:
    """A cue word ends at most a few function words before `span` (where the last is a place
    preposition, `span` must not be a name: "treatment at Tranquil Spa"); with `before`, also: a
    cue word follows `span` directly (the value names its kind's noun: "the Sales team"),
    after "as" ("PayPal as your payment method") or after an amount's currency word ("a 2,500
    dollar deductible")."""
    for start, end in cues:
        if before and span[1] <= start and LABELS_BEFORE.fullmatch(
                request[span[1]:start].strip(" \"'“”‘’").lower()):
            return True
        if end <= span[0]:
            if _SENTENCE_END.search(request[end:span[0] + 1]):
                continue  # "make it roth. E-83310": a label ends with its sentence
            between = request[end:span[0]].lower().split()
            between = [w.strip(".,:;\"'()[]") for w in between]
            if between and between[-1] in _WHERE and request[span[0]].isupper():
                continue  # "treatment at Tranquil Spa": where the thing is, not what
            if len(between) <= 3 and all(w in STOPWORDS or w in _CONNECTORS
                                         for w in between if w):
                return True
    return False
