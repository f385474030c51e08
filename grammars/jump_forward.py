"""Jump-forward in the tokenizer's own spelling: the text a grammar forces next, as the tokens
the model's tokenizer would use for it, accepted into the matcher without sampling.

xgrammar's `find_jump_forward_tokens` matches the longest vocabulary entries greedily, which
may spell the forced text differently from the tokenizer (the model then reads a split it
never saw in training). Here the forced string is encoded by the tokenizer instead, and two
rules keep it conservative:

- every token must be accepted by the matcher; the first one it refuses ends the jump;
- the last token is held back when a longer vocabulary token that the grammar allows at the
  same place starts with it (`":"` when `":"$` exists and a string may start with `$`): the
  model could have spelled the boundary with that longer token, so it chooses there itself.

What is forced is appended to the sequence and fed to the model in the next forward pass
together with the sampled token before it, so it costs no pass of its own.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
from numpy.typing import NDArray


class ForcingMatcher(Protocol):
    """What jump-forward needs of a matcher (`schema.ConstraintMatcher` is one)."""

    def jump_forward_string(self) -> str: ...

    def accept(self, token_id: int) -> bool: ...

    def rollback(self, num_tokens: int) -> None: ...

    def allowed_mask(self) -> NDArray[np.bool_]: ...


class JumpForward:
    """Canonical jump-forward for one tokenizer; immutable, shareable across requests.

    `encode(text)` gives the tokenizer's ids for `text` (no special tokens); `vocab` is every
    token id's bytes (`GrammarTokenizerInfo.decoded_vocab`)."""

    def __init__(self, encode: Callable[[str], Sequence[int]], vocab: Sequence[bytes]) -> None:
        self._encode = encode
        self._vocab = vocab
        order = sorted(range(len(vocab)), key=lambda t: vocab[t])
        self._sorted_bytes = [vocab[t] for t in order]  # for prefix ranges by bisection
        self._sorted_ids = np.array(order, dtype=np.int64)

    def force(self, matcher: ForcingMatcher, *, max_tokens: int) -> tuple[int, ...]:
        """Accept the tokens the grammar forces next (at most `max_tokens`) into `matcher`
        and return them; () when nothing is forced."""
        text = matcher.jump_forward_string()
        if not text or max_tokens <= 0:
            return ()
        accepted: list[int] = []
        for token in list(self._encode(text))[:max_tokens]:
            if not matcher.accept(token):
                break
            accepted.append(token)
        if accepted and self._is_extendable(matcher, accepted[-1]):
            matcher.rollback(1)
            accepted.pop()
        return tuple(accepted)

    def _is_extendable(self, matcher: ForcingMatcher, last: int) -> bool:
        """True when, where `last` was accepted, the grammar also allows a longer token that
        starts with `last`'s bytes. Leaves `matcher` as it found it."""
        prefix = self._vocab[last]
        start = bisect.bisect_right(self._sorted_bytes, prefix)  # strictly longer ones follow
        stop = bisect.bisect_left(self._sorted_bytes, prefix + b"\xff" * 8, lo=start)
        longer = self._sorted_ids[start:stop]
        longer = longer[[self._sorted_bytes[start + i].startswith(prefix)
                         for i in range(len(longer))]] if len(longer) else longer
        if not len(longer):
            return False
        matcher.rollback(1)
        allowed = matcher.allowed_mask()
        is_extendable = bool(allowed[longer[longer < len(allowed)]].any())
        if not matcher.accept(last):
            raise RuntimeError(f"the matcher refused token {last} it accepted before")  # bug
        return is_extendable
