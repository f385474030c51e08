"""JSON-schema and regex constraints, compiled with xgrammar, and the per-request matcher.

`CompiledGrammar` is immutable and shared (compile once per schema and tokenizer);
`ConstraintMatcher` is one request's mutable state over it, never shared. JSON is compact:
separators `","` and `":"` and no free whitespace, so the model spends no tokens on layout.

xgrammar imports torch, so it is imported only when a function here first needs it:
`import stackroute.grammars.schema` stays light.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
from numpy.typing import NDArray
from stackroute.grammars.cache import tokenizer_fingerprint
from stackroute.runtime.errors import InputError
from stackroute.runtime.schemas import schema_error
from tokenizers import Tokenizer

_COMPACT_SEPARATORS = (",", ":")


class InvalidGrammarError(InputError, ValueError):
    """A schema or regex that cannot be compiled; the message names the problem."""

    code = "invalid_grammar"


class GrammarKind(StrEnum):
    JSON_SCHEMA = "json_schema"
    REGEX = "regex"


@dataclass(frozen=True, eq=False)
class GrammarTokenizerInfo:
    """xgrammar's view of one tokenizer at one model vocab size, with its compiler.

    `vocab_size` is the model's logits width (embedding rows), which may exceed the
    tokenizer's size; masks are that wide and ids past the tokenizer are never allowed.
    """

    fingerprint: str
    vocab_size: int
    stop_token_ids: tuple[int, ...]
    decoded_vocab: tuple[bytes, ...]
    xgrammar_info: Any
    compiler: Any

    def text_of(self, token_ids: Sequence[int]) -> str:
        """The text of generated tokens, stop tokens left out."""
        stops = set(self.stop_token_ids)
        pieces = (
            self.decoded_vocab[token] if token < len(self.decoded_vocab) else b""
            for token in token_ids
            if token not in stops
        )
        return b"".join(pieces).decode("utf-8", errors="replace")


_infos: dict[tuple[str, int, tuple[int, ...] | None], GrammarTokenizerInfo] = {}
_infos_lock = threading.Lock()


def grammar_tokenizer_info(
    tokenizer: object,
    vocab_size: int,
    *,
    stop_token_ids: Sequence[int] | None = None,
    max_threads: int = 8,
) -> GrammarTokenizerInfo:
    """xgrammar tokenizer info and compiler, built once per (fingerprint, vocab size, stops).

    Stop tokens default to the tokenizer's EOS (`<|im_end|>` for SmolLM2); a raw
    `tokenizers.Tokenizer` has no EOS, so it needs `stop_token_ids`. Building takes about
    0.2 s for a 49k vocab.
    """
    if vocab_size <= 0:
        raise ValueError(f"vocab_size must be positive; got {vocab_size}")
    stops = None if stop_token_ids is None else tuple(stop_token_ids)
    key = (tokenizer_fingerprint(tokenizer), vocab_size, stops)
    with _infos_lock:
        info = _infos.get(key)
        if info is None:
            info = _build_info(tokenizer, key[0], vocab_size, stops, max_threads)
            _infos[key] = info
        return info


def _build_info(
    tokenizer: object,
    fingerprint: str,
    vocab_size: int,
    stop_token_ids: tuple[int, ...] | None,
    max_threads: int,
) -> GrammarTokenizerInfo:
    import xgrammar as xgr

    hf_tokenizer: Any = tokenizer
    if isinstance(tokenizer, Tokenizer):
        if stop_token_ids is None:
            raise ValueError("a raw tokenizers.Tokenizer has no EOS: pass stop_token_ids")
        from transformers import PreTrainedTokenizerFast

        fast_tokenizer: Any = PreTrainedTokenizerFast
        hf_tokenizer = fast_tokenizer(tokenizer_object=tokenizer)
    info = xgr.TokenizerInfo.from_huggingface(
        hf_tokenizer,
        vocab_size=vocab_size,
        stop_token_ids=None if stop_token_ids is None else list(stop_token_ids),
    )
    return GrammarTokenizerInfo(
        fingerprint=fingerprint,
        vocab_size=vocab_size,
        stop_token_ids=tuple(int(token) for token in info.stop_token_ids),
        decoded_vocab=tuple(info.decoded_vocab),
        xgrammar_info=info,
        compiler=xgr.GrammarCompiler(info, max_threads=max_threads),
    )


@dataclass(frozen=True, eq=False)
class CompiledGrammar:
    """An immutable compiled constraint, shareable across requests and threads."""

    kind: GrammarKind
    source: str
    """The compact schema JSON or the regex, as compiled."""
    info: GrammarTokenizerInfo
    compile_ms: float
    grammar: Any
    """The xgrammar CompiledGrammar."""

    def matcher(self) -> ConstraintMatcher:
        """A fresh per-request matcher at the start of the grammar."""
        return ConstraintMatcher(self)


def compile_schema(
    schema: Mapping[str, Any], info: GrammarTokenizerInfo, *, strict_mode: bool = True
) -> CompiledGrammar:
    """Compile a JSON schema to a compact-JSON grammar.

    `strict_mode` forbids properties and items the schema does not list (tool arguments
    must not invent keys). Schemas that are not valid JSON Schema, or that xgrammar cannot
    compile, raise InvalidGrammarError (a ValueError) naming the problem.
    """
    if not isinstance(schema, Mapping):
        raise InvalidGrammarError(f"a JSON schema must be an object; got {type(schema).__name__}")
    # The runtime's check: microseconds for plain schemas, the 2020-12 metaschema otherwise.
    problem = schema_error(schema)
    if problem is not None:
        raise InvalidGrammarError(f"invalid JSON schema {problem}")
    try:
        # Key order is kept: xgrammar emits properties in the schema's declared order.
        source = json.dumps(schema, ensure_ascii=False, separators=_COMPACT_SEPARATORS)
    except (TypeError, ValueError) as error:
        raise InvalidGrammarError(f"JSON schema is not serialisable: {error}") from None
    started = time.perf_counter()
    try:
        grammar = info.compiler.compile_json_schema(
            source,
            any_whitespace=False,
            separators=_COMPACT_SEPARATORS,
            strict_mode=strict_mode,
        )
    except RuntimeError as error:
        raise InvalidGrammarError(f"cannot compile JSON schema: {_reason(error)}") from None
    compile_ms = (time.perf_counter() - started) * 1e3
    return CompiledGrammar(GrammarKind.JSON_SCHEMA, source, info, compile_ms, grammar)


def compile_regex(pattern: str, info: GrammarTokenizerInfo) -> CompiledGrammar:
    """Compile a regex (the whole output must match it); bad patterns raise
    InvalidGrammarError."""
    started = time.perf_counter()
    try:
        grammar = info.compiler.compile_regex(pattern)
    except RuntimeError as error:
        raise InvalidGrammarError(f"cannot compile regex {pattern!r}: {_reason(error)}") from None
    compile_ms = (time.perf_counter() - started) * 1e3
    return CompiledGrammar(GrammarKind.REGEX, pattern, info, compile_ms, grammar)


_LOG_PREFIX = re.compile(r"^\[[^\]]*\]\s*\S+:\d+:\s*")
_CHECK_PREFIX = re.compile(r"^Check failed: .*? is false:\s*")


def _reason(error: BaseException) -> str:
    """xgrammar's message without its C++ log prefix ("[time] file.cc:123: ")."""
    message = str(error).strip()
    message = _LOG_PREFIX.sub("", message)
    return _CHECK_PREFIX.sub("", message)


class ConstraintMatcher:
    """One request's position in a compiled grammar: mutable, never shared.

    `allowed_mask()` costs about 15-40 µs a token for a 49k vocab (xgrammar fills the bitmask
    in a few µs; the rest is unpacking it to bools); engines that apply masks with torch can
    take `bitmask()` directly.
    """

    def __init__(self, compiled: CompiledGrammar) -> None:
        import xgrammar as xgr

        self.compiled = compiled
        self._matcher = xgr.GrammarMatcher(compiled.grammar)
        vocab_size = compiled.info.vocab_size
        self._bitmask = np.full((1, (vocab_size + 31) // 32), -1, dtype=np.int32)
        self._token_ids: list[int] = []

    @property
    def vocab_size(self) -> int:
        return self.compiled.info.vocab_size

    @property
    def token_ids(self) -> tuple[int, ...]:
        """Every token accepted so far (stop token included once accepted)."""
        return tuple(self._token_ids)

    @property
    def is_finished(self) -> bool:
        """True once the stop token is accepted: nothing more may be generated."""
        return bool(self._matcher.is_terminated())

    @property
    def is_complete(self) -> bool:
        """True when the text so far satisfies the grammar (a stop token may follow)."""
        return bool(self._matcher.is_completed())

    def bitmask(self) -> NDArray[np.int32]:
        """The next-token bitmask, `[1, ceil(vocab / 32)]` int32, bit i of word w = token
        32w + i. A view of the matcher's buffer: valid until the next call."""
        if self.is_finished:
            self._bitmask.fill(0)
        else:
            self._matcher.fill_next_token_bitmask(self._bitmask)
        return self._bitmask

    def allowed_mask(self) -> NDArray[np.bool_]:
        """`[vocab_size]` bool: the tokens the grammar allows next (none once finished)."""
        words = self.bitmask().astype("<i4", copy=False)
        bits = np.unpackbits(words.view(np.uint8), count=self.vocab_size, bitorder="little")
        return bits.view(np.bool_)

    def accept(self, token_id: int) -> bool:
        """Advance by one token; False (and no change) if the grammar forbids it."""
        if not self._matcher.accept_token(int(token_id)):
            return False
        self._token_ids.append(int(token_id))
        return True

    def jump_forward_tokens(self) -> tuple[int, ...]:
        """Tokens the grammar forces next (may differ from the tokenizer's own split of
        the same text); accept each, and prefill them instead of decoding them."""
        if not hasattr(self._matcher, "find_jump_forward_tokens"):  # xgrammar < 0.2.9
            from stackroute.grammars.xgrammar_compat import greedy_jump_forward_tokens

            return greedy_jump_forward_tokens(self._matcher, self.compiled.info)
        return tuple(int(token) for token in self._matcher.find_jump_forward_tokens())

    def jump_forward_string(self) -> str:
        """The longest text the grammar forces next (complete UTF-8 characters only)."""
        try:
            return str(self._matcher.find_jump_forward_string())
        except UnicodeDecodeError:  # xgrammar < 0.2.9: a forced half character; no jump
            return ""

    def rollback(self, num_tokens: int) -> None:
        """Undo the last `num_tokens` accepted tokens."""
        if not 0 <= num_tokens <= len(self._token_ids):
            raise ValueError(
                f"cannot roll back {num_tokens} tokens; {len(self._token_ids)} accepted"
            )
        if num_tokens:
            self._matcher.rollback(num_tokens)
            del self._token_ids[-num_tokens:]

    def text_of(self, token_ids: Sequence[int]) -> str:
        return self.compiled.info.text_of(token_ids)

    def text(self) -> str:
        """The text accepted so far, stop token left out."""
        return self.text_of(self._token_ids)
