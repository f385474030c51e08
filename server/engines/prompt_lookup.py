"""Drafts copied from the prompt: the next tokens of a generation guessed by finding the text
generated so far in the prompt and reading on from there (prompt-lookup decoding).

Tool arguments copy most of their value text from the request ("Send 500 dollars to Asha" →
`{"amount": 500, "recipient": "Asha"}`), and the request is in the prompt. The decoder feeds
a draft with the next forward pass and keeps the longest prefix its own greedy picks agree
with, so a right guess saves passes and a wrong one costs only the rows it added to that pass.

The match is on text, not token ids: a value inside a JSON string is spelled with different
tokens than the same words in a sentence (`"Asha` against ` Asha`), so ids rarely match where
text does. The draft is the tokenizer's own encoding of the text that follows the match, cut
before its last token (which may be the start of a longer word the tokenizer would split
differently once the next characters are known).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

DEFAULT_MAX_DRAFT_TOKENS = 8
MATCH_CHARS = (32, 16, 8, 5, 3)  # the suffix lengths tried, longest first
CHARS_PER_TOKEN = 6  # generous: read this many prompt characters per drafted token


class PromptLookup:
    """Drafts for one generation over one prompt text; `encode` gives the tokenizer's ids
    for a text (no special tokens)."""

    def __init__(self, prompt_text: str, encode: Callable[[str], Sequence[int]], *,
                 max_draft_tokens: int = DEFAULT_MAX_DRAFT_TOKENS) -> None:
        if max_draft_tokens < 1:
            raise ValueError(f"max_draft_tokens must be at least 1, got {max_draft_tokens}")
        self.prompt_text = prompt_text
        self.encode = encode
        self.max_draft_tokens = max_draft_tokens

    def draft(self, generated_text: str, *, max_tokens: int) -> tuple[int, ...]:
        """Up to `max_tokens` (and `max_draft_tokens`) token ids that follow the longest
        suffix of `generated_text` found in the prompt (its last occurrence); () when no
        suffix of at least 3 characters with a letter or digit in it occurs."""
        limit = min(max_tokens, self.max_draft_tokens)
        if limit <= 0:
            return ()
        for size in MATCH_CHARS:
            if len(generated_text) < size:
                continue
            suffix = generated_text[-size:]
            if not any(c.isalnum() for c in suffix):
                continue
            at = self.prompt_text.rfind(suffix)
            if at < 0:
                continue
            start = at + size
            text = self.prompt_text[start:start + CHARS_PER_TOKEN * (limit + 1)]
            ids = list(self.encode(text))
            if start + len(text) < len(self.prompt_text):
                ids = ids[:-1]  # the text was cut: its last token may be part of a longer one
            return tuple(ids[:limit])
        return ()
