"""A growing answer as text deltas: what the transformers and vLLM engines' `generate_stream`
send, decided once here.

An engine pushes the answer's text so far (after each decode step); the assembler sends the
part that is safe to show: never past a stop string (the final answer is cut there), never a
half character (a byte-level token can end inside a UTF-8 sequence, decoded as U+FFFD), and it
holds back a tail that could still become a stop string. `finish` sends what is left of the
final text, so the deltas always join to exactly `Generation.text`.

>>> sent = []
>>> assembler = TextAssembler(sent.append, stop=("\\n\\n",))
>>> assembler.push("Hello")
>>> assembler.push("Hello wor\\n")  # the newline could start the stop string: held back
>>> assembler.push("Hello world\\n\\nmore")
>>> assembler.finish("Hello world")
>>> [d.text for d in sent]
['Hello', ' wor', 'ld']
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from stackroute.server.engines.base import DeltaSink, TextDelta

log = logging.getLogger(__name__)

_REPLACEMENT = "\ufffd"  # what a decoder shows for an incomplete UTF-8 sequence


class TextAssembler:
    """Safe deltas of one answer; one per request (it holds what was sent)."""

    def __init__(self, on_delta: DeltaSink, *, stop: Sequence[str] = ()) -> None:
        self.on_delta = on_delta
        self.stop = tuple(s for s in stop if s)
        self.sent = ""
        self.num_deltas = 0

    def push(self, text: str) -> None:
        """The answer so far (whole, not a delta): send what of it is safe to show."""
        self._send(self._safe(text))

    def finish(self, text: str) -> None:
        """The final answer: send the rest of it."""
        if not text.startswith(self.sent):  # our bug: a decoder that rewrote earlier text
            log.error("streamed text %r is not a prefix of the answer %r", self.sent[-40:],
                      text[:80])
            return
        self._send(text)

    def _safe(self, text: str) -> str:
        cut = min((i for i in (text.find(s) for s in self.stop) if i >= 0), default=-1)
        if cut >= 0:
            return text[:cut]
        text = text.rstrip(_REPLACEMENT)
        hold = max((k for s in self.stop for k in range(1, len(s)) if text.endswith(s[:k])),
                   default=0)
        return text[:len(text) - hold]

    def _send(self, text: str) -> None:
        if len(text) <= len(self.sent) or not text.startswith(self.sent):
            return
        delta, self.sent = text[len(self.sent):], text
        self.num_deltas += 1
        self.on_delta(TextDelta(delta))
