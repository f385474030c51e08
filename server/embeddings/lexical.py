"""Lexical evidence: BM25 over each leaf's words (name, description, parameter names and their
descriptions, examples), as production tool search does beside dense vectors.

Scores are normalised per request to [0, 1]: a leaf's BM25 divided by the most any document
could score for this request (every request word present, saturated: `idf * (k1 + 1)` each).
A request that shares no informative word with the catalog scores about 0 everywhere, so the
normalised score can be mixed with cosine similarity under one set of thresholds.

>>> index = Bm25Index.from_texts(["send money to a person", "pay a utility bill"])
>>> [round(float(s), 3) for s in index.scores("send money to Asha")]
[0.303, 0.0]
>>> name_share("setDroneSpeed", "Set the speed of the robot to 19 m/s")
0.6666666666666666
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from stackroute.server.embeddings.words import singular, split_name

# Words every request and tool shares; they only add noise to the overlap.
STOP_WORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "for", "from", "i", "in",
    "is", "it", "me", "my", "of", "on", "or", "please", "the", "this", "to", "with", "you",
    "your", "want", "would", "like", "need", "could",
))


def tokens(text: str) -> list[str]:
    """Lower-case words of `text`, camelCase and snake_case split, stop words dropped,
    plurals folded (`payments` → `payment`)."""
    return [singular(w) for w in split_name(text) if w not in STOP_WORDS]


# `name_share`: a name word of four letters or more is said by a request word that starts with
# its first 5 ("creates" says "create", "calculation" says "calculate", "information" says
# "info"); a shorter one only by itself ("car" is not "cardigan"). 5 was read off the
# abstention fits on dev (4 to 6 and whole words within a sample or two:
# bench/results/2026-12-06-cpu-out-of-scope-named/).
NAME_PREFIX = 5


def name_share(name: str, text: str) -> float:
    """The share of a tool name's words (`words.split_name`: camelCase, acronyms, snake_case
    and digits apart; the verb included; words of three letters or more, plurals folded) that
    `text` says; 1.0 for a name with no such word. A request the tool does not serve seldom
    says what the tool is called, even where its embedding lands near it."""
    named = {w for w in (singular(w) for w in split_name(name)
                         if w.isalpha() and w not in STOP_WORDS) if len(w) > 2}
    if not named:
        return 1.0
    said = [w for w in tokens(text) if len(w) > 2]
    return sum(any(w == n or (len(n) > 3 and w.startswith(n[:NAME_PREFIX])) for w in said)
               for n in named) / len(named)


@dataclass(frozen=True)
class Bm25Index:
    """Postings (word → documents holding it, with counts) and the statistics BM25 needs."""

    postings: dict[str, tuple[NDArray[np.int64], NDArray[np.float32]]]  # rows, counts
    norms: NDArray[np.float32]  # [num_docs]: k1 * (1 - b + b * length / mean length)
    idf: dict[str, float]
    unknown_idf: float  # what a word no document holds counts in a request's ceiling
    k1: float = 1.2

    @classmethod
    def from_texts(cls, texts: Sequence[str], *, k1: float = 1.2,
                   b: float = 0.75) -> Bm25Index:
        freqs = [Counter(tokens(t)) for t in texts]
        num_docs = max(len(freqs), 1)
        rows: dict[str, list[int]] = {}
        counts: dict[str, list[float]] = {}
        for row, tf in enumerate(freqs):
            for word, count in tf.items():
                rows.setdefault(word, []).append(row)
                counts.setdefault(word, []).append(count)
        # BM25+'s non-negative idf: a word in every document still counts a little.
        idf = {w: math.log(1.0 + (num_docs - len(r) + 0.5) / (len(r) + 0.5))
               for w, r in rows.items()}
        lengths = np.array([sum(tf.values()) for tf in freqs], dtype=np.float32)
        mean_length = float(lengths.mean()) if lengths.size and lengths.mean() > 0 else 1.0
        postings = {w: (np.array(rows[w], dtype=np.int64), np.array(counts[w], np.float32))
                    for w in rows}
        return cls(postings=postings, norms=k1 * (1 - b + b * lengths / mean_length),
                   idf=idf, unknown_idf=float(np.mean(list(idf.values()))) if idf else 1.0,
                   k1=k1)

    @property
    def num_docs(self) -> int:
        return int(self.norms.shape[0])

    def scores(self, request: str) -> NDArray[np.float32]:
        """Every document's BM25 for `request`, over its best possible score: `[num_docs]`
        in [0, 1]. Request words no document holds count in that ceiling (at the mean idf),
        so a request about something else scores near 0 everywhere; numbers and identifiers
        (words with digits) are values, not evidence, and are left out."""
        values = (w for w in request.split() if not any(c.isdigit() for c in w))
        words = list(dict.fromkeys(tokens(" ".join(values))))
        out = np.zeros(self.num_docs, dtype=np.float32)
        ceiling = sum(self.idf.get(w, self.unknown_idf) for w in words) * (self.k1 + 1)
        if ceiling <= 0:
            return out
        for word in words:
            posting = self.postings.get(word)
            if posting is None:
                continue
            rows, counts = posting
            out[rows] += self.idf[word] * counts * (self.k1 + 1) / (counts + self.norms[rows])
        return out / np.float32(ceiling)
