"""One seam over the tokenizers the constraint layer accepts.

A tokenizer here is either a Hugging Face `transformers` tokenizer (anything with a
`backend_tokenizer`, or at least `encode(text, add_special_tokens=...)`) or a raw
`tokenizers.Tokenizer`. Callers pass whichever they hold; nothing else in `grammars/` needs to
know which kind it got.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from tokenizers import Tokenizer


@runtime_checkable
class _EncodesText(Protocol):
    def encode(self, text: str, add_special_tokens: bool = ...) -> Any: ...


def backend_of(tokenizer: object) -> Tokenizer | None:
    """The Rust `tokenizers.Tokenizer` behind `tokenizer`, or None for a pure-Python one."""
    if isinstance(tokenizer, Tokenizer):
        return tokenizer
    backend = getattr(tokenizer, "backend_tokenizer", None)
    return backend if isinstance(backend, Tokenizer) else None


def encode_batch(tokenizer: object, texts: Sequence[str]) -> list[list[int]]:
    """Token ids of each text, without special tokens (no BOS, no template).

    For a `transformers` tokenizer this is exactly `tokenizer.encode(text,
    add_special_tokens=False)` for each text, in one batched call: about 57 µs a name for
    SmolLM2 on 2 cores, of which 20 µs is the Rust backend and the rest the transformers
    wrapper (6,309 seal-tools names: 0.36 s).
    """
    if not texts:
        return []
    if isinstance(tokenizer, Tokenizer):
        return [encoding.ids for encoding in tokenizer.encode_batch(list(texts),
                                                                    add_special_tokens=False)]
    if callable(tokenizer) and backend_of(tokenizer) is not None:
        # The transformers call, not the backend, so that any Python-level preprocessing the
        # tokenizer class adds stays part of the canonical tokenisation.
        batch = tokenizer(list(texts), add_special_tokens=False)
        return [list(ids) for ids in batch["input_ids"]]
    if isinstance(tokenizer, _EncodesText):
        return [list(tokenizer.encode(text, add_special_tokens=False)) for text in texts]
    raise TypeError(
        f"expected a transformers tokenizer or a tokenizers.Tokenizer, got {type(tokenizer)!r}"
    )
