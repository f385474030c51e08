"""Optional values the request gives by meaning, not by name.

"Provide the marketing insights for the film X *on Facebook*" fills `platform` ("the social
media platform") though no word of the property is in the request; the words-gate
(`support.offered`) cannot see that. Here a sentence embedding of each candidate value is
compared with one of each property ("platform: the social media platform ..."): an optional
property is supported where one of its candidates, held back by nothing (non-negative prior),
is at least `MIN_SIMILARITY` like the property and more like it than like any other property
of the leaf (a value fits one property best: "Facebook" is the `platform`, not the `author`).

Measured at the gold leaf on Seal-Tools dev (every call of the 700 requests, 566 optional
properties the words-gate leaves out, 148 of them in the gold call): similarity 0.3 takes 70
gold ones (46 with the gold value among the candidates) and 48 that are not; 0.4, 42 (29)
and 13; 0.45, 35 (24) and 10; 0.5, 20 (14) and 6
(`bench/results/2026-12-05-cpu-optional-meaning/`).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from stackroute.server.embeddings.embedder import TextEmbedder
from stackroute.server.embeddings.words import name_words
from stackroute.server.routing.arguments.candidate import Candidate
from stackroute.server.routing.arguments.candidates import schema_of
from stackroute.server.routing.arguments.cues import STOPWORDS

MIN_SIMILARITY = 0.4
# An enum value the request says in other words ("robbed" for `stolen`): the value's words as
# near as this to some 1-3 words of the request, and this much nearer than any other value's.
# Read on the enum misses of the check desks (telecom, logistics, an insurer, a clinic): the
# values meant scored 0.66-0.87 with margins of 0.23 or more, requests that mean none 0.51 at
# most; a near miss ("the patient" for `patient_request`, 0.71, margin 0.17) stays out
# (bench/results/2026-12-07-cpu-heldout-insurance-telecom/). Required enums only
# (`ValueMenus.meant`).
ENUM_SIMILARITY = 0.6
ENUM_MARGIN = 0.2
_WORD = re.compile(r"[A-Za-z][\w'-]*")


def property_text(name: str, schema: Mapping[str, Any]) -> str:
    """What a property means, as embedded: its name in words and its description.

    >>> property_text("fat_content", {"description": "Fat content in percent"})
    'fat content: Fat content in percent'
    """
    description = schema.get("description")
    words = name_words(name)
    return f"{words}: {description}" if isinstance(description, str) and description else words


class ValueMeaning:
    """Embeds property texts and candidate values (each text once, the last `max_texts`
    kept) and finds, among an optional property's candidates, those that mean it. One is
    shared by every session a router serves: its vectors are kept under a lock.

    `load` gives the embedder; it is called on the first embedding (a request whose
    optional properties its words settle loads no model)."""

    def __init__(self, load: Callable[[], TextEmbedder], *,
                 min_similarity: float = MIN_SIMILARITY, max_texts: int = 4096) -> None:
        self._load = load
        self._embedder: TextEmbedder | None = None
        self.min_similarity = min_similarity
        self.max_texts = max_texts
        self._vectors: OrderedDict[str, NDArray[np.float32]] = OrderedDict()
        self._lock = threading.Lock()

    def matching(self, name: str, properties: Mapping[str, Any],
                 found: Sequence[Candidate]) -> list[Candidate]:
        """Those of `found` (property `name`'s candidates, the caller having left out any
        already given to another property) that mean `name` among `properties`, in order."""
        values = [c for c in found if c.prior >= 0]
        if not values or name not in properties:
            return []
        names = list(properties)
        meanings = self._embed([property_text(n, schema_of(properties[n])) for n in names])
        similarity = self._embed([c.text for c in values]) @ meanings.T  # [values, properties]
        column = names.index(name)
        fits = (similarity[:, column] >= self.min_similarity) \
            & (similarity.argmax(axis=1) == column)
        return [c for c, fit in zip(values, fits, strict=True) if fit]

    def enum_value(self, values: Sequence[str], request: str) -> str | None:
        """The value of `values` the request says in other words: its words (underscores as
        spaces) at least ENUM_SIMILARITY like some one to three words of the request and
        ENUM_MARGIN more than any other value's; None where no value is that clearly meant."""
        grams, similarity = self._against_runs(values, request)
        if len(values) < 2 or not grams:
            return None
        best = similarity.max(axis=1)  # [values]
        order = np.argsort(-best)
        top, second = float(best[order[0]]), float(best[order[1]])
        if top >= ENUM_SIMILARITY and top - second >= ENUM_MARGIN:
            return values[int(order[0])]
        return None

    def meant_values(self, values: Sequence[str], request: str) -> dict[str, str]:
        """The values the request says in other words, each with the words that say it: a
        run of one to three words at least ENUM_SIMILARITY like the value and ENUM_MARGIN more
        like it than like any other value ("a fridge" for `refrigerator`, "by text" for `sms`;
        not "sitting" for `chair`, 0.18 nearer it than `sofa`). A list's items: several values
        may be meant, each by its own words; a value said whole is meant by itself."""
        grams, similarity = self._against_runs(values, request)
        if len(values) < 2 or not grams:
            return {}
        best: dict[str, tuple[float, str]] = {}
        for g, gram in enumerate(grams):
            order = np.argsort(-similarity[:, g])
            top, second = float(similarity[order[0], g]), float(similarity[order[1], g])
            value = values[int(order[0])]
            if top >= ENUM_SIMILARITY and top - second >= ENUM_MARGIN \
                    and top > best.get(value, (0.0, ""))[0]:
                best[value] = (top, gram)
        return {value: gram for value, (_, gram) in best.items()}

    def _against_runs(self, values: Sequence[str], request: str,
                      ) -> tuple[list[str], NDArray[np.float32]]:
        """The request's runs of one to three words (`_word_runs`), and each value's words'
        (underscores as spaces) similarity to each: `[values, runs]`; nothing embedded where
        there are fewer than two values or no runs."""
        grams = _word_runs(request)
        if len(values) < 2 or not grams:
            return grams, np.zeros((len(values), 0), dtype=np.float32)
        texts = [re.sub(r"[_\-]+", " ", v) for v in values]
        return grams, self._embed(texts) @ self._embed(grams).T

    def embedder(self) -> TextEmbedder:
        if self._embedder is None:
            self._embedder = self._load()
        return self._embedder

    def _embed(self, texts: list[str]) -> NDArray[np.float32]:
        with self._lock:
            new = list(dict.fromkeys(t for t in texts if t not in self._vectors))
            if new:
                for text, vector in zip(new, self.embedder().embed(new), strict=True):
                    self._vectors[text] = vector
            for text in texts:
                self._vectors.move_to_end(text)
            vectors = np.stack([self._vectors[t] for t in texts])
            while len(self._vectors) > self.max_texts:
                self._vectors.popitem(last=False)
            return vectors


def _word_runs(request: str) -> list[str]:
    """The request's runs of one to three words, each with a word that is no function word."""
    words = _WORD.findall(request)
    return sorted({" ".join(words[k:k + n]) for n in (1, 2, 3)
                   for k in range(len(words) - n + 1)
                   if not all(w.lower() in STOPWORDS for w in words[k:k + n])})
