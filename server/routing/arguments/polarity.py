"""A boolean's value from the request's words: "turn *off* the kitchen lights" gives `on`
false, "*enable* notifications" gives `notifications` true.

Strong words (on / off after a switching verb or at a clause's end, enable, disable, activate,
deactivate, true, false, yes) decide over weak ones (no, not, non, never, without, include, exclude;
not "with", which is mostly "a meeting with Ana"), so "don't forget to turn on the lights" is
true. Where several strong words are there, the one nearest before the property's own name
counts ("enable the alarm and disable the lights"), else the nearest after it. A request with
none gives both values the same prior: the choice is the model's (or, for an optional property,
it stays out), unless it names the flag itself ("*force* stop the instance", "as a *dry run*"):
that sets it, at NAMED_PRIOR.

>>> [(c.text, c.prior) for c in boolean_candidates("Turn off the kitchen lights", [])]
[('false', 2.0), ('true', 0.0)]
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from stackroute.server.routing.arguments.candidate import Candidate
from stackroute.server.routing.arguments.cues import STOPWORDS

POLARITY_PRIOR = 2.0
NAMED_PRIOR = 1.0  # a flag the request names with no yes/no word: set, less surely
_STRONG = {"enable": True, "enabled": True, "activate": True, "activated": True, "true": True,
           "yes": True, "disable": False, "disabled": False, "deactivate": False,
           "deactivated": False, "false": False}
_WEAK = {"include": True, "including": True, "no": False, "not": False, "non": False,
         "without": False, "exclude": False, "excluding": False, "don't": False,
         "dont": False, "never": False}
_SWITCHES = frozenset(("turn", "switch", "toggle", "set", "put", "keep", "leave", "flip",
                       "power", "shut"))
_WORD = re.compile(r"[a-z']+|[.,;:!?]")
# words of a flag's name the request need not say where it says another: a qualifier ("only"
# of `nonstop_only`), or the verb of what a flag adds ("include" of `includeInstallments`)
_QUALIFIERS = frozenset(("only", "flag", "enabled", "included", "requested", "required",
                         "include", "with", "show", "return"))
# A flag that gives notice (`notify_customer`, `send_notification`): the request may ask for it
# in other words, "let the customer know", "text the patient", "inform", "email everyone"; where
# the flag names whom it tells, those words must tell them
_NOTICE_WORDS = frozenset(("notify", "notification", "notifications", "inform", "alert",
                           "alerts", "send"))
_NOTICE = re.compile(r"\b(?:(?P<verb>notify|inform|alert)|(?P<medium>tell|text|e-?mail|message|"
                     r"sms)|let\s+(?P<whom>(?:[\w']+\s+){1,3}?)know)\b")
# whom a medium's verb tells where the flag names no one ("email everyone"; not "email the
# report")
_EVERYONE = frozenset(("everyone", "everybody", "them", "him", "her", "me", "us", "all",
                       "attendees", "participants", "guests"))


def boolean_candidates(request: str, cues: list[tuple[int, int]],
                       words: Sequence[str] = ()) -> list[Candidate]:
    """`true` and `false`, the value the request's words say for this property (the strong
    word nearest before one of its `cues`, else the first) at prior POLARITY_PRIOR; with no
    such word, `true` at NAMED_PRIOR where the request says the property's `words` (its name),
    in order, or asks for the notice it gives in other words ("let the customer know")."""
    found = _polarities(request)
    strong = [(start, value) for start, value, is_strong in found if is_strong]
    pool = strong or [(start, value) for start, value, _ in found]
    if not pool:
        named = NAMED_PRIOR if _says_name(request, words) or _gives_notice(request, words) \
            else 0.0
        return [Candidate(True, "true", "boolean", named), Candidate(False, "false", "boolean")]
    if cues:
        _, value = min(pool, key=lambda p: min(_reach(p[0], a) for a, _ in cues))
    else:
        _, value = pool[0]
    chosen = Candidate(value, "true" if value else "false", "boolean", POLARITY_PRIOR)
    other = Candidate(not value, "false" if value else "true", "boolean", 0.0)
    return [chosen, other]


def _says_name(request: str, words: Sequence[str]) -> bool:
    """Whether the request's words hold `words` one after another, each whole or (four
    letters or more) by its first four ("forced" says `force`; "run" alone is no `dry_run`),
    a linking verb or a function word allowed between two ("receipt *is* attached", "eligible
    *for* rehire"); a qualifier of the name ("only" of `nonstop_only`) or the verb of what
    it adds ("include" of `includeInstallments`) need not be said where another word is. A
    compound's words are its parts ("follow-up") or its head alone ("the late-cancellation
    fee" says `waive_cancellation_fee`); a name of two words or more may be said side by side
    in another order ("cosigner required" for `requireCosigner`)."""
    lowered = request.lower()
    parts = [w for w in re.findall(r"[a-z]+", lowered) if w not in STOPWORDS]  # as the
    # name's words: "eligible for rehire" says eligible_for_rehire
    heads = [w for w in re.findall(r"[a-z]+(?![a-z]*-[a-z])", lowered) if w not in STOPWORDS]
    words = [w for w in words if w not in _QUALIFIERS] or list(words)
    n = len(words)

    def says(s: str, w: str) -> bool:
        return s == w or (len(w) >= 4 and s[:4] == w[:4])

    # in order, or (two words or more) side by side in another: "cosigner required"
    return n > 0 and any(
        all(says(s, w) for s, w in zip(said[k:k + n], words, strict=True))
        or (n > 1 and all(any(says(s, w) for s in said[k:k + n]) for w in words))
        for said in (parts, heads) for k in range(len(said) - n + 1))


def _gives_notice(request: str, words: Sequence[str]) -> bool:
    """Whether the request asks for the notice a flag named `words` gives, in other words:
    "let the customer know", "text the patient", "inform the customer" (whom the flag names
    among the three words after), or for a flag that names no one, "notify", "inform", "let
    them know", "email everyone"; or by its name, "send the notification email".

    >>> _gives_notice("Cancel it and let the customer know", ["notify", "customer"])
    True
    >>> _gives_notice("Cancel it and let the warehouse know", ["notify", "customer"])
    False
    """
    if not _NOTICE_WORDS & set(words):
        return False
    whom = [w for w in words if w not in _NOTICE_WORDS]
    if re.search(r"\bnotifications?\b", request.lower()):
        return True  # the notice asked for by name, whom it tells left to the flag
    for match in _NOTICE.finditer(request.lower()):
        told = (match["whom"] or "").split() or request.lower()[match.end():].split()[:3]
        if whom:
            if any(t[:4] == w[:4] for t in told for w in whom):
                return True
        elif match["verb"] or match["whom"] or (told and told[0] in _EVERYONE):
            return True
    return False


def _reach(word: int, cue: int) -> int:
    """How far a yes/no word at `word` is from the property's name at `cue`: one before it
    governs it ("disable the lights"), so any word before beats every word after."""
    return cue - word if word <= cue else 10 ** 6 + word - cue


def _polarities(request: str) -> list[tuple[int, bool, bool]]:
    """(position, value, is_strong) for each word of the request that says yes or no."""
    tokens = [(m[0], m.start()) for m in _WORD.finditer(request.lower())]
    out = []
    for k, (word, start) in enumerate(tokens):
        if word in ("on", "off"):
            before = {w for w, _ in tokens[max(0, k - 4):k]}
            at_end = k + 1 == len(tokens) or not tokens[k + 1][0].isalpha()
            if before & _SWITCHES or at_end:
                out.append((start, word == "on", True))
        elif word in _STRONG:
            out.append((start, _STRONG[word], True))
        elif word in _WEAK:
            out.append((start, _WEAK[word], False))
    return out
