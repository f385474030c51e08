"""Word spans as values: every run of up to MAX_SPAN_WORDS words of one clause that neither
starts nor ends with a function word, scored as a value (names, a property's label next to
it, the leaf's own words restated, and no label where they are the leaf's own phrase said
again, a noun phrase cut after its first word or before its last, a verb before its object,
the whole phrase after "called" or "named", and after "about" for a query or topic)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from stackroute.server.embeddings.words import name_words
from stackroute.server.routing.arguments.candidate import Candidate
from stackroute.server.routing.arguments.cues import STOPWORDS, near
from stackroute.server.routing.arguments.literals import labels_literal
from stackroute.server.routing.arguments.request_text import RequestText

MAX_SPAN_WORDS = 6
# an id: letters and digits, four digits or more, or three groups of digits or more joined by
# dashes ("4471-0082-15"; two are a range, "12-15 years"; a date's are no id, "2027-05-17")
_IDLIKE = re.compile(r"(?=.*\d)(?=.*[A-Za-z])[A-Za-z0-9_#-]{3,}|#?\d{4,}"
                     r"|(?!\d{4}-\d\d?-\d\d?$|\d\d?-\d\d?-\d{2,4}$)\d+(?:-\d+){2,}")
_QUANTITY = re.compile(r"\d+(?:\.\d+)?-[a-z]+")  # a number joined to its unit: "90-day", "3-night"
_NAME_JOINERS = frozenset(("of", "the", "and", "de", "&"))
_PLACE_WORDS = frozenset(("location", "city", "country", "region", "place", "address", "area",
                          "destination", "venue", "site", "state", "town"))
_PLACE_PREPOSITIONS = frozenset(("in", "at", "near", "from", "of", "to", "around", "within"))
# a property that holds who made a work: its name after "by" ("The Overstory by Richard Powers")
_MAKER_WORDS = frozenset(("author", "artist", "composer", "writer", "director", "creator",
                          "painter", "singer", "band", "performer", "photographer", "designer",
                          "architect", "novelist", "poet", "songwriter", "illustrator"))
_BY = re.compile(r"\bby\s+$", re.IGNORECASE)
# How a request asks ("search for", "check the"); after an article they are nouns, and may be
# values ("the search service")
_ASKING_VERBS = frozenset("""provide retrieve obtain fetch calculate compute determine check
tell explain describe perform create generate analyze analyse assess evaluate estimate search
look""".split())  # noqa: SIM905
# Words that say what the request asks, not what it asks about ("information on", "the
# specified address"): a span of these alone is rarely a value.
FILLER = _ASKING_VERBS | frozenset("""information info details detail specified specific certain
given particular related relevant appropriate according following respective provided
corresponding desired requested specifically regarding needed required id
called named titled entitled url uri ip link""".split())  # noqa: SIM905
# (the last line: words that say a name or a literal follows, "called", "the URL", never one)
SPAN_WORD_COST = 0.4  # prior per extra word of a span: shorter values first
TOPIC_PENALTY = 1.5  # a span of the leaf's own words (filler between): the ask restated
FILLER_PENALTY = 2.5  # a span of filler alone: never a value, below even the leaf's words
EDGE_PENALTY = 1.0  # a longer span that starts or ends with one ("restoration in the tropical")
OPENING_PENALTY = 2.5  # a span from the request's first word (its verb) is rarely a value
CUT_PENALTY = 0.5  # a lower-case span whose noun phrase starts a word earlier ("rainforest"
#                   of "tropical rainforest", "chloride" of "Sodium chloride"; not "2.3" of
#                   "version 2.3"): the phrase first
PHRASE_BONUS = 0.5  # a span that takes in the lower-case word its shorter self would stop
#                    short of, and ends there: the whole noun phrase ("smoking regulations",
#                    not "smoking"; "5-8 years"; not where that word is the property's own or
#                    the leaf's: "the elderly population", "epic literature"). A bonus, not a
#                    penalty on the shorter span: a value's prior stays its log-odds (below
#                    zero, `missing_values: ask` asks for it)
VERB_PENALTY = 0.5  # a lower-case word right before an article takes it as its object: a verb
#                    or a preposition ("undergoing an appendectomy"), not a value
_ARTICLES = frozenset(("a", "an", "the"))
UNIT_PENALTY = 2.0  # a lower-case span right after a number: its unit ("31.5 kg", "6 items")
LABEL_PENALTY = 2.0  # the words naming a literal right after them ("the URL", "IP address")
NAME_PART_BONUS = 2.5  # the part of a name its property holds ("Bell" of "Marcus Bell" for
#                        `last_name`), above the whole name (+0.6 a word) and the part's
#                        capitalised neighbour (-1.0)
NAMED_BONUS = 2.5  # the whole phrase after "called" / "named" ("a meeting called Budget review
#                    on Monday"): a name given in the request, not its first word alone
_NAMING = re.compile(r"\b(?:called|named|titled|entitled)\s+$", re.IGNORECASE)
WORD_ID_PENALTY = 3.0  # plain words ("game", "Facebook") for a property named for an id or a
#                       number: its value is a token (an id, digits); a word beside the id's
#                       name is its kind ("the game server ID"), so more than a label's +2
# Two notions of a property that holds an id, kept together: any of ID_LIKE_WORDS in its name
# lifts id-like tokens (a code, a key or an account number may be a word too); a name that
# ends in one of ID_NAME_ENDINGS holds a token, never plain words (not "code": "en", "LAX";
# not "account": "account_type").
ID_LIKE_WORDS = frozenset(("id", "code", "number", "account", "identifier", "key", "sku", "no"))
ID_NAME_ENDINGS = frozenset(("id", "identifier", "number", "no", "sku"))
_PLAIN_WORDS = re.compile(r"[A-Za-z]?[a-z]+(?: [a-z]+)*")
# A participle after a noun starts what qualifies it, so the noun's phrase ends before it: a
# lower-case word in -ed after a consonant ("labelled", "created"; not "speed"), or one of the
# common irregular ones
_PARTICIPLE = re.compile(r"[a-z]{2,}[^aeiou\W\d]ed")
_PARTICIPLES = frozenset("""sent made written given taken shown known done seen kept held told
found built paid bought sold""".split())  # noqa: SIM905
SUBJECT_BONUS = 1.5  # the phrase after "about" for a property that holds what to look for
_ABOUT = re.compile(r"\b(?:about|regarding|concerning)\s+(?:the\s+|a\s+|an\s+)?$", re.IGNORECASE)
_SUBJECT_WORDS = frozenset(("query", "topic", "subject", "keyword", "keywords", "term", "terms",
                            "search", "q"))


@dataclass(frozen=True)
class LeafWords:
    """A leaf's own words: `stems`, their 4-letter stems (`stem in words`), `text`, its
    name split at _ and camelCase and its description, lower case, one space between words,
    and `name`, its name's words alone."""

    stems: frozenset[str] = frozenset()
    text: str = ""
    name: str = ""

    def __contains__(self, stem: object) -> bool:
        return stem in self.stems

    def says(self, phrase: str) -> bool:
        """Whether the leaf's text holds `phrase` (its words, in order, whole)."""
        return f" {phrase.lower()} " in f" {self.text} "

    def names(self, phrase: str) -> bool:
        """Whether the leaf's name holds `phrase`'s words, in order, whole ("EC2" in
        startEC2Instance, "SLA" in getSLAReport)."""
        return bool(self.name) and f" {name_words(phrase)} " in f" {self.name} "


NO_LEAF_WORDS = LeafWords()


def topic_words(name: str, description: str) -> LeafWords:
    """A leaf's own words: its name split at _ and camelCase, and its description's words
    (the stems leave function words out).

    >>> words = topic_words("getForestRestorationProgress", "Retrieve forest restoration data")
    >>> "rest" in words, words.says("forest restoration"), words.says("forest data")
    (True, True, False)
    >>> topic_words("getSLAReport", "").names("SLA"), topic_words("getSLAReport", "").names("LA")
    (True, False)
    """
    text = f"{name_words(name)} {description}".lower()
    return LeafWords(frozenset(w[:4] for w in re.findall(r"[a-z]+", text)
                               if len(w) >= 3 and w not in STOPWORDS),
                     " ".join(re.findall(r"[a-z0-9]+", text)), name_words(name))


def spans(request: RequestText, cues: list[tuple[int, int]], words: list[str], *,
          wants_date: bool = False, topic: LeafWords = NO_LEAF_WORDS) -> list[Candidate]:
    """Word spans; none that cuts into a date or a time for a property that wants a date
    (it has the date's normalised forms instead: "January 7" is not a check-out date).
    The request's literals' labels are held back."""
    whole = request.text
    tokens, starts = request.tokens, request.starts
    when, quotes = request.when, request.quotes
    literals = list(request.literals)
    own = {w[:4] for w in words}

    def is_capital(k: int) -> bool:
        # a sentence's (or line's) first word is capitalised for the sentence, not a name
        return 0 <= k < len(tokens) and k not in starts and tokens[k].word[:1].isupper()

    is_id = any(w in ID_LIKE_WORDS for w in words)
    names_an_id = bool(words) and words[-1] in ID_NAME_ENDINGS
    is_place = any(w in _PLACE_WORDS for w in words)
    is_maker = any(w in _MAKER_WORDS for w in words)
    is_subject = any(w in _SUBJECT_WORDS for w in words)
    part = _name_part(words)
    out = []
    for i in range(len(tokens)):
        # what stands before the span's first word is the same for every span it starts
        before = whole[:tokens[i].start]
        bonus = (NAMED_BONUS if _NAMING.search(before) else 0.0) \
            + (SUBJECT_BONUS if is_subject and _ABOUT.search(before) else 0.0)
        after_by = is_maker and _BY.search(before) is not None  # "by Richard Powers"
        for j in range(i, min(len(tokens), i + MAX_SPAN_WORDS)):
            first, last = tokens[i].word, tokens[j].word
            if first.lower() in STOPWORDS or last.lower() in STOPWORDS:
                continue
            if i in starts and j == i and first.isalpha() and first[:1].isupper() \
                    and len(tokens) > 1:
                continue  # a sentence's opening verb ("Send", "Find"); not an id ("P-31877")
            start, end = tokens[i].start, tokens[j].end
            if last[-2:].lower() in ("'s", "’s") and len(last) > 2:
                end -= 2  # "John Smith's traits": the name, not its possessive
            if re.search(r"[.;:!?]\s|,\s|[()\[\]\n]", request.marks[start:end]) \
                    or j in request.titles:
                continue  # spans stay inside one clause and line (and out of brackets), and
                #           a title ("Dr.") is no name by itself, nor a name's end
            text = whole[start:end]
            if any(q in text for q in "\"“”") or all(
                    t.word.lower() in STOPWORDS or t.word.lower()[:4] in own
                    for t in tokens[i:j + 1]):
                continue  # a quote's edge, or the property's own name ("ID", "post ID")
            span_words = [t.word for t in tokens[i:j + 1]]
            # an acronym of the tool's own name ("VPN" for grantVPNAccess, "EC2" for
            # startEC2Instance) is the tool said again, not a name or an id
            acronym = text.isupper() and topic.names(text)
            # a name: capitalised words, joiners between, and a number right after one of
            # its capitalised words ("Bank of America", "Boeing 777", "BMW 3 Series")
            capitalised = not acronym and i not in starts and span_words[0][:1].isupper() \
                and span_words[0].lower() not in FILLER and all(
                t[:1].isupper() or t.lower() in _NAME_JOINERS
                or (k > 0 and t.isdigit() and span_words[k - 1][:1].isupper())
                for k, t in enumerate(span_words))
            prior = -SPAN_WORD_COST * (j - i)
            fillers = [t.lower() in STOPWORDS or t.lower() in FILLER for t in span_words]
            if first.lower() in _ASKING_VERBS and _token_before(request, i).lower() in _ARTICLES:
                fillers[0] = False  # a noun here: "the search service"
            asks = [acronym or f or t.lower()[:4] in topic
                    for f, t in zip(fillers, span_words, strict=True)]
            if all(fillers):  # "the specified", "ID": whatever the case
                prior -= FILLER_PENALTY
            elif capitalised:
                pass  # a name is a value, even one made of the leaf's words
            elif all(asks):
                prior -= TOPIC_PENALTY
            elif asks[0] or asks[-1]:
                prior -= EDGE_PENALTY
            if first.isalpha() and first.islower() and i not in starts \
                    and _modifies(request, i, topic, capital=is_capital(i - 1)):
                prior -= CUT_PENALTY
            if j > i and last.isalpha() and last.islower() \
                    and tokens[j - 1].word.lower() not in FILLER | STOPWORDS \
                    and _runs_on(request, j - 1, own | topic.stems) \
                    and not _runs_on(request, j, own | topic.stems):
                prior += PHRASE_BONUS
            if last.isalpha() and last.islower() and _next_word(request, j) in _ARTICLES:
                prior -= VERB_PENALTY
            if first.isalpha() and first.islower() and _counts(request, i):
                prior -= UNIT_PENALTY
            if i in starts and len(tokens) > 1 and j > i and not first[:1].isdigit():
                prior -= OPENING_PENALTY  # "Retrieve information about": the ask, not a value
            if capitalised:  # a whole name beats its parts ("New York", not "New")
                prior += 1.5 + 0.6 * (j - i) - (1.0 if is_capital(j + 1) or is_capital(i - 1)
                                               else 0.0)
            if part and capitalised and j == i and _is_name_part(part, i, is_capital,
                                                                 request.titles):
                prior += NAME_PART_BONUS
            names_its_kind = capitalised and j > i and span_words[-1].lower()[:4] in own
            if names_its_kind:
                prior += 2.0  # a name ending with its kind: "the Supreme Court" for `court`
            elif any(t.lower()[:4] in own for t in span_words):
                prior -= 1.5  # "ID X": the value without its label
            if wants_date and any(a < end and start < b for a, b in when):
                continue
            if any(a <= start and end <= b for a, b in quotes):
                prior -= 2.0  # a piece of a quoted value (the whole quote is offered)
            if any(a < end and start < b for a, b in when):
                prior -= 3.0  # dates and times are offered normalised where a property
                #               wants one ("15" of "15:38" is no value)
            kind = "id" if _IDLIKE.fullmatch(text) and not acronym \
                and not _QUANTITY.fullmatch(text) else "span"
            if is_place and _after_place_word(whole, start):
                prior += 1.0  # "the water quality of the lake", "rooms in New York"
            if after_by and capitalised:
                prior += 2.0  # a maker's name for `author`
            if kind == "id":
                prior += 2.0 if is_id else 0.5
            elif names_an_id and _PLAIN_WORDS.fullmatch(text):
                prior -= WORD_ID_PENALTY
            if labels_literal(whole, end, literals) and not any(
                    a < end and start < b for a, b in (lit.span for lit in literals)):
                prior -= LABEL_PENALTY
            # the leaf's own words with a label beside them, as the leaf says them, are the
            # tool's name said again ("public transportation" for `transportation_type`,
            # "forest restoration" for `forest_type`), no label of a value
            restated = all(asks) and not capitalised and _says_with_neighbour(
                topic, text, _token_before(request, i).lower(), _next_word(request, j))
            if not restated and near((start, end), cues, whole, before=True):
                prior += 2.0
            if bonus and _ends_phrase(request, j):
                prior += bonus
            out.append(Candidate(text, text, kind, prior, (start, end)))
    return out


def _name_part(words: list[str]) -> str | None:
    """Which part of a person's name a property (its `words`) holds: "first", "last", or
    None for the whole name."""
    held = set(words)
    if held & {"surname", "lastname"} or (held & {"last", "family"} and "name" in held):
        return "last"
    if held & {"forename", "firstname"} or (held & {"first", "given"} and "name" in held):
        return "first"
    return None


def _is_name_part(part: str, i: int, is_capital: Callable[[int], bool],
                  titles: frozenset[int]) -> bool:
    """Whether the capitalised word `i` is the `part` of a name: its last word after another
    or a title ("Marcus *Bell*", "Dr. *Nguyen*"), or its first word before another, a title
    not counted ("*Marcus* Bell", "Dr. *Julia* Thompson")."""
    after_name = is_capital(i - 1) and i - 1 not in titles
    if part == "last":
        return (after_name or i - 1 in titles) and not is_capital(i + 1)
    return is_capital(i + 1) and not after_name


def _modifies(request: RequestText, i: int, topic: LeafWords, *, capital: bool) -> bool:
    """Whether the word before token `i`, in the same clause, is a lower-case content word
    that is not the leaf's own, or (`capital`: a capitalised word that does not open its
    sentence) any content word: the span cuts a noun phrase after its first word
    ("rainforest" of "tropical rainforest", "chloride" of "Sodium chloride")."""
    word = _token_before(request, i)
    lowered = word.lower()
    if not word.isalpha() or lowered in STOPWORDS or lowered in FILLER:
        return False
    return capital or (word.islower() and lowered[:4] not in topic)


def _says_with_neighbour(topic: LeafWords, text: str, before: str, after: str) -> bool:
    """Whether the leaf says `text` with the content word before or after it."""
    return (before not in STOPWORDS and topic.says(f"{before} {text}")) or (
        after not in STOPWORDS and topic.says(f"{text} {after}"))


def _token_before(request: RequestText, i: int) -> str:
    """The word before token `i` in the same clause, as written ("" where the clause starts)."""
    if i == 0 or not request.same_clause(i - 1, i):
        return ""
    return request.tokens[i - 1].word


def _next_word(request: RequestText, j: int) -> str:
    """The word after token `j` in the same clause, lower-cased ("" where the clause ends)."""
    if j + 1 >= len(request.tokens) or not request.same_clause(j, j + 1):
        return ""
    return request.tokens[j + 1].word.lower()


def _runs_on(request: RequestText, j: int, labels: set[str] | frozenset[str]) -> bool:
    """Whether the word after token `j`, in the same clause, is a lower-case content word
    that is not one of `labels` (4-letter stems): the span ends inside a noun phrase."""
    lowered = _next_word(request, j)
    word = request.tokens[j + 1].word if lowered else ""
    return word.islower() and word.isalpha() and lowered not in STOPWORDS \
        and lowered not in FILLER and lowered not in _PLACE_PREPOSITIONS \
        and lowered[:4] not in labels


def _ends_phrase(request: RequestText, j: int) -> bool:
    """Whether the phrase ends with token `j`: the request ends, a clause mark follows, or the
    next word is a function word ("Budget review | on Monday") or a participle ("invoices |
    labelled finance", "the budget review | sent last week")."""
    if j + 1 >= len(request.tokens) or not request.same_clause(j, j + 1):
        return True
    word = request.tokens[j + 1].word
    return word.lower() in STOPWORDS or word in _PARTICIPLES or bool(_PARTICIPLE.fullmatch(word))


def _counts(request: RequestText, i: int) -> bool:
    """Whether token `i` follows a number in the same clause: the number's unit or what it
    counts ("weighing 31.5 kg", "a list of 6 items"), not a value of its own."""
    return i > 0 and request.same_clause(i - 1, i) and bool(
        re.fullmatch(r"[$€£]?\d[\d,.]*[kKMB%]?", request.tokens[i - 1].word))


def names_a_place(words: list[str], candidate: Candidate, request: str) -> bool:
    """Whether `candidate` is a name right after a place preposition ("from Italy", "at the
    Staples Center") and the property (its `words`) holds a place: a value of its kind.

    >>> c = Candidate("Italy", "Italy", "span", 0.0, (31, 36))
    >>> text = "Tell me about the wine made in Italy."
    >>> names_a_place(["country"], c, text), names_a_place(["grape"], c, text)
    (True, False)
    """
    if candidate.kind != "span" or candidate.span is None or candidate.span[0] == 0:
        return False
    start = candidate.span[0]
    return any(w in _PLACE_WORDS for w in words) and request[start].isupper() \
        and candidate.prior >= 0 and _after_place_word(request, start)


def names_a_maker(words: list[str], candidate: Candidate, request: str) -> bool:
    """Whether `candidate` is a name right after "by" and the property (its `words`) holds
    who made a work (`author`, `artist`): a value of its kind.

    >>> c = Candidate("Chopin", "Chopin", "span", 0.0, (21, 27))
    >>> names_a_maker(["composer"], c, "play the nocturne by Chopin")
    True
    """
    if candidate.kind != "span" or candidate.span is None or candidate.prior < 0:
        return False
    start = candidate.span[0]
    return any(w in _MAKER_WORDS for w in words) and request[start].isupper() \
        and _BY.search(request[:start]) is not None


def _after_place_word(request: str, start: int) -> bool:
    """A place preposition (and an article) right before `start`: "in New York"."""
    before = request[:start].lower().split()[-2:]
    if before and before[-1] in ("the", "a", "an"):
        before = before[:-1]
    return bool(before) and before[-1] in _PLACE_PREPOSITIONS
