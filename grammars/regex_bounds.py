r"""An unbounded regex made bounded without losing a match up to a length.

xgrammar ignores `maxLength` (and `minLength`) beside a JSON-schema `pattern`: measured on
0.2.8 (vLLM's pin) and 0.2.9, `{"pattern": "[a-z ]*", "maxLength": 5}` accepts 12 letters,
and `allOf` with a `maxLength` is ignored as well. A lookahead such as `(?=.{0,5}$)` compiles
but is ignored too. So a pattern with `*`, `+` or `{n,}` lets a small model write until the
token cap. `bound_pattern` rewrites each unbounded quantifier to a bounded one, `{n,c}`,
where `c` is the most iterations any match of at most `max_chars` characters can use:

- a non-empty iteration takes at least `max(1, min width)` characters, and the rest of the
  pattern around the quantifier takes at least its own minimum, so `c = max(n, budget //
  width)` with `budget = max_chars - (the minimum of everything beside it)`;
- iterations that match the empty string can be dropped, so no match needs more.

Every string of at most `max_chars` characters that the pattern matches is still matched,
and every string the rewrite matches was matched before (only counts shrink). Where the
pattern has one unbounded quantifier over a fixed-width atom in a fixed-width context
(`[a-z ]*`, `^\w+$`, `[A-Z]{2}\d+`) the rewrite matches nothing longer than `max_chars`;
with several, each takes the budget the others leave, so the longest match is a few times
`max_chars` (reported as `max_chars` of the result): bounded, though not exactly.

The price is compile time: xgrammar unrolls a count up to 128 into states, each with its own
token mask, so `[a-z ]{0,64}` compiles in about 0.2-0.3 s where `[a-z ]*` takes 4 ms (0.2.9,
SmolLM2's 49k vocabulary, once per schema and cached). A caller passes `max_count` for an
engine that cannot compile large counts (xgrammar 0.2.8: none above 128).

Left alone, with the reason (`UnboundablePattern`): an unbounded quantifier inside another
(`(\w+\.)+`: a lossless bound there is quadratic in the cap), lookarounds (xgrammar ignores
them, so the grammar's language is not the pattern's), backreferences, word boundaries, and
syntax the engines read differently (`[]a]`, `[[:alpha:]]`, a `{` that is not a count).

>>> bound_pattern("[a-z ]*", 64)
BoundedPattern(pattern='[a-z ]{0,64}', max_chars=64)
>>> bound_pattern(r"^\w+@\w+$", 10)
BoundedPattern(pattern='^\\w{1,8}@\\w{1,8}$', max_chars=17)
>>> bound_pattern("[A-Z]{2}-[0-9]{4}", 64).pattern  # bounded already: unchanged
'[A-Z]{2}-[0-9]{4}'
"""

from __future__ import annotations

from dataclasses import dataclass

_ZERO_WIDTH_ESCAPES = frozenset("bBAzZG")
_QUANTIFIER_START = frozenset("*+?{")


class UnboundablePattern(ValueError):
    """A pattern `bound_pattern` cannot bound without changing what it matches; the message
    says why."""


@dataclass(frozen=True)
class BoundedPattern:
    """A pattern that matches at most `max_chars` characters."""

    pattern: str
    max_chars: int


@dataclass(frozen=True)
class _Node:
    """One parsed piece: its text when unchanged, and the fewest and most characters it
    matches (`max_len` None: unbounded)."""

    min_len: int
    max_len: int | None


@dataclass(frozen=True)
class _Atom(_Node):
    text: str  # a character, a class, an escape, `.`, an anchor or an inline flag


@dataclass(frozen=True)
class _Seq(_Node):
    items: tuple[_Node, ...]


@dataclass(frozen=True)
class _Alt(_Node):
    branches: tuple[_Seq, ...]


@dataclass(frozen=True)
class _Group(_Node):
    opening: str  # "(", "(?:", "(?P<name>", "(?i:" …
    body: _Alt


@dataclass(frozen=True)
class _Repeat(_Node):
    body: _Node
    lo: int
    hi: int | None
    suffix: str  # "" greedy, "?" lazy, "+" possessive


def bound_pattern(pattern: str, max_chars: int, *,
                  max_count: int | None = None) -> BoundedPattern:
    """`pattern` with its unbounded quantifiers bounded for matches of at most `max_chars`
    characters; unchanged when it is bounded already. Raises `UnboundablePattern`, also
    when a new count would exceed `max_count` (what the grammar engine compiles)."""
    if max_chars < 0:
        raise ValueError(f"max_chars must not be negative; got {max_chars}")
    tree = _Parser(pattern).parse()
    if tree.max_len is not None:
        return BoundedPattern(pattern, tree.max_len)
    bounded = _bound(tree, max_chars)
    largest = _largest_count(bounded)
    if max_count is not None and largest > max_count:
        raise UnboundablePattern(f"the bounded pattern has a count of {largest}, above the "
                                 f"{max_count} the grammar engine compiles")
    if bounded.max_len is None:  # every unbounded quantifier is bounded or refused above
        raise AssertionError(f"bounding {pattern!r} left it unbounded")
    return BoundedPattern(_text(bounded), bounded.max_len)


# -- rewriting ------------------------------------------------------------------------------

def _bound(node: _Node, budget: int) -> _Node:
    """`node` for matches in which it takes at most `budget` characters."""
    budget = max(budget, 0)  # below zero nothing fits: the fewest iterations lose nothing
    if node.max_len is not None:
        return node
    if isinstance(node, _Alt):
        return _alt(tuple(_seq_of(_bound(b, budget)) for b in node.branches))
    if isinstance(node, _Seq):
        total_min = sum(item.min_len for item in node.items)
        return _seq(tuple(_bound(item, budget - (total_min - item.min_len))
                          for item in node.items))
    if isinstance(node, _Group):
        body = _bound(node.body, budget)
        return _Group(body.min_len, body.max_len, node.opening, _alt_of(body))
    if isinstance(node, _Repeat):
        if node.body.max_len is None:
            if node.hi is None:
                raise UnboundablePattern(
                    "an unbounded quantifier inside another: a lossless bound would allow "
                    "about the cap squared characters")
            body = _bound(node.body, budget)
            return _repeat(body, node.lo, node.hi, node.suffix)
        width = max(1, node.body.min_len)
        return _repeat(node.body, node.lo, max(node.lo, budget // width), node.suffix)
    raise AssertionError(f"an atom is bounded: {node!r}")


def _text(node: _Node) -> str:
    if isinstance(node, _Atom):
        return node.text
    if isinstance(node, _Seq):
        return "".join(_text(item) for item in node.items)
    if isinstance(node, _Alt):
        return "|".join(_text(branch) for branch in node.branches)
    if isinstance(node, _Group):
        return f"{node.opening}{_text(node.body)})"
    if isinstance(node, _Repeat):
        if node.hi is None:
            count = {0: "*", 1: "+"}.get(node.lo, f"{{{node.lo},}}")
        elif node.lo == node.hi:
            count = f"{{{node.lo}}}"
        elif (node.lo, node.hi) == (0, 1):
            count = "?"
        else:
            count = f"{{{node.lo},{node.hi}}}"
        return f"{_text(node.body)}{count}{node.suffix}"
    raise AssertionError(f"unknown node {node!r}")


def _largest_count(node: _Node) -> int:
    if isinstance(node, _Repeat):
        return max(node.hi or node.lo, _largest_count(node.body))
    if isinstance(node, _Seq):
        return max((_largest_count(item) for item in node.items), default=0)
    if isinstance(node, _Alt):
        return max(_largest_count(branch) for branch in node.branches)
    if isinstance(node, _Group):
        return _largest_count(node.body)
    return 0


def _seq(items: tuple[_Node, ...]) -> _Seq:
    maxes = [item.max_len for item in items]
    return _Seq(sum(item.min_len for item in items),
                None if None in maxes else sum(m for m in maxes if m is not None), items)


def _alt(branches: tuple[_Seq, ...]) -> _Alt:
    maxes = [branch.max_len for branch in branches]
    return _Alt(min(branch.min_len for branch in branches),
                None if None in maxes else max(m for m in maxes if m is not None), branches)


def _seq_of(node: _Node) -> _Seq:
    return node if isinstance(node, _Seq) else _seq((node,))


def _alt_of(node: _Node) -> _Alt:
    return node if isinstance(node, _Alt) else _alt((_seq_of(node),))


def _repeat(body: _Node, lo: int, hi: int | None, suffix: str) -> _Repeat:
    if body.max_len == 0 or hi == 0:
        max_len: int | None = 0
    elif hi is None or body.max_len is None:
        max_len = None
    else:
        max_len = hi * body.max_len
    return _Repeat(lo * body.min_len, max_len, body, lo, hi, suffix)


# -- parsing --------------------------------------------------------------------------------

class _Parser:
    """A recursive-descent reader of the regex syntax JSON-schema patterns use (ECMA 262 as
    Python and xgrammar read it), keeping each atom's text so the rewrite changes only
    counts."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.pos = 0

    def parse(self) -> _Alt:
        tree = self._alternation()
        if self.pos != len(self.pattern):
            raise UnboundablePattern(f"an unmatched ')' at position {self.pos}")
        return tree

    def _peek(self, offset: int = 0) -> str:
        index = self.pos + offset
        return self.pattern[index] if index < len(self.pattern) else ""

    def _alternation(self) -> _Alt:
        branches = [self._sequence()]
        while self._peek() == "|":
            self.pos += 1
            branches.append(self._sequence())
        return _alt(tuple(branches))

    def _sequence(self) -> _Seq:
        items: list[_Node] = []
        while self._peek() not in ("", "|", ")"):
            atom = self._atom()
            items.append(self._quantified(atom) if self._peek() in _QUANTIFIER_START else atom)
        return _seq(tuple(items))

    def _atom(self) -> _Node:
        char = self._peek()
        if char == "(":
            return self._group()
        if char == "[":
            return self._class()
        if char == "\\":
            return self._escape()
        if char in _QUANTIFIER_START:
            raise UnboundablePattern(f"a quantifier with nothing to repeat at position "
                                     f"{self.pos}")
        self.pos += 1
        width = 0 if char in "^$" else 1
        return _Atom(width, width, char)

    def _group(self) -> _Node:
        start = self.pos
        self.pos += 1
        if self._peek() == "?":
            head = self.pattern[self.pos:self.pos + 3]
            if head[:2] in ("?=", "?!") or head in ("?<=", "?<!"):
                raise UnboundablePattern("a lookaround: xgrammar ignores it, so the grammar "
                                         "does not match what the pattern says")
            if head[:2] in ("?P", "?<"):
                if head == "?P=":
                    raise UnboundablePattern("a backreference")
                end = self.pattern.find(">", self.pos)
                if end < 0:
                    raise UnboundablePattern("an unterminated group name")
                self.pos = end + 1
            else:  # "(?:", "(?i:", or a flag group "(?i)" that matches nothing
                self.pos += 1
                while self._peek().isalpha() or self._peek() == "-":
                    self.pos += 1
                if self._peek() == ")":
                    self.pos += 1
                    return _Atom(0, 0, self.pattern[start:self.pos])
                if self._peek() != ":":
                    raise UnboundablePattern(f"an unknown group at position {start}")
                self.pos += 1
        opening = self.pattern[start:self.pos]
        body = self._alternation()
        if self._peek() != ")":
            raise UnboundablePattern(f"an unclosed group at position {start}")
        self.pos += 1
        return _Group(body.min_len, body.max_len, opening, body)

    def _class(self) -> _Atom:
        start = self.pos
        self.pos += 1
        if self._peek() == "^":
            self.pos += 1
        if self._peek() == "]":  # Python reads a literal ']'; xgrammar an empty class
            raise UnboundablePattern("a class that starts with ']' (the engines disagree)")
        while self._peek() != "]":
            char = self._peek()
            if char == "":
                raise UnboundablePattern(f"an unterminated class at position {start}")
            if char == "[":  # POSIX classes and set operations: the engines disagree
                raise UnboundablePattern("a '[' inside a class")
            self.pos += 2 if char == "\\" else 1
        self.pos += 1
        return _Atom(1, 1, self.pattern[start:self.pos])

    def _escape(self) -> _Atom:
        start = self.pos
        char = self._peek(1)
        if char == "":
            raise UnboundablePattern("a pattern that ends in '\\'")
        if char.isdigit() or char == "k":
            raise UnboundablePattern("a backreference")
        if char in _ZERO_WIDTH_ESCAPES:
            raise UnboundablePattern(f"the assertion '\\{char}' (xgrammar rejects or "
                                     "misreads it)")
        self.pos += 2
        if char in "pPu" and self._peek() == "{":  # \p{L}, \u{1F600}
            end = self.pattern.find("}", self.pos)
            if end < 0:
                raise UnboundablePattern(f"an unterminated '\\{char}{{' at position {start}")
            self.pos = end + 1
        elif char == "u":
            self.pos += 4
        elif char == "x":
            self.pos += 2
        elif char == "c":
            self.pos += 1
        return _Atom(1, 1, self.pattern[start:self.pos])

    def _quantified(self, atom: _Node) -> _Node:
        char = self._peek()
        self.pos += 1
        lo: int
        hi: int | None
        if char == "*":
            lo, hi = 0, None
        elif char == "+":
            lo, hi = 1, None
        elif char == "?":
            lo, hi = 0, 1
        else:
            lo, hi = self._counts()
        suffix = ""
        if self._peek() in ("?", "+"):
            suffix = self._peek()
            self.pos += 1
        if self._peek() in _QUANTIFIER_START:
            raise UnboundablePattern(f"a repeated quantifier at position {self.pos}")
        if isinstance(atom, _Atom) and atom.max_len == 0:
            raise UnboundablePattern("a quantifier on an anchor or a flag")
        return _repeat(atom, lo, hi, suffix)

    def _counts(self) -> tuple[int, int | None]:
        end = self.pattern.find("}", self.pos)
        body = self.pattern[self.pos:end] if end >= 0 else ""
        low, comma, high = body.partition(",")
        if not low.isdigit() or (high and not high.isdigit()):
            # Python reads a literal '{' here and xgrammar an error: the engines disagree
            raise UnboundablePattern(f"a '{{' that is not a count at position {self.pos - 1}")
        self.pos = end + 1
        lo = int(low)
        hi = None if comma and not high else int(high) if comma else lo
        if hi is not None and hi < lo:
            raise UnboundablePattern(f"a count {{{body}}} whose maximum is below its minimum")
        return lo, hi
