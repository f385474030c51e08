"""Prefix cache: matching, splits, byte bound and LRU, concurrency, independence, real logits.

Most tests use synthetic KV whose value at a position encodes (layer, head, token, position),
so a returned cache can be compared exactly with the KV its prefix must have.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence
from typing import Any

import pytest
import torch
from stackroute.server.engines.kv_compat import kv_keyword
from stackroute.server.engines.model_store import LoadedModel
from stackroute.server.engines.prefix_cache import PrefixCache
from transformers import DynamicCache

NUM_LAYERS, NUM_KV_HEADS, HEAD_DIM = 3, 2, 4
BYTES_PER_TOKEN = NUM_LAYERS * 2 * NUM_KV_HEADS * HEAD_DIM * 4  # keys + values, float32


def synthetic_kv(token_ids: Sequence[int], *, dtype: torch.dtype = torch.float32) -> DynamicCache:
    """KV for `token_ids`: position p of layer l, head h holds (l, h, token, p) codes."""
    tokens = torch.tensor(list(token_ids), dtype=torch.float32)  # [seq]
    positions = torch.arange(len(token_ids), dtype=torch.float32)
    per_layer = []
    for layer in range(NUM_LAYERS):
        heads = torch.arange(NUM_KV_HEADS, dtype=torch.float32)[:, None]  # [heads, 1]
        code = layer * 1e6 + heads * 1e5 + tokens[None, :] * 100 + positions[None, :]
        keys = code[None, :, :, None].repeat(1, 1, 1, HEAD_DIM)  # [1, heads, seq, dim]
        per_layer.append((keys.to(dtype), -keys.to(dtype)))
    return DynamicCache(per_layer)


def assert_kv_equal(kv: Any, expected: Any) -> None:
    assert len(kv.layers) == len(expected.layers)
    for got, want in zip(kv.layers, expected.layers, strict=True):
        assert torch.equal(got.keys, want.keys)
        assert torch.equal(got.values, want.values)


def insert(cache: PrefixCache, token_ids: Sequence[int]) -> None:
    cache.insert(token_ids, synthetic_kv(token_ids))


def check_lookup(cache: PrefixCache, query: Sequence[int], expected_tokens: int) -> None:
    hit = cache.lookup(query)
    assert hit.num_tokens == expected_tokens
    if expected_tokens == 0:
        assert hit.kv is None
    else:
        assert hit.kv.get_seq_length() == expected_tokens
        assert_kv_equal(hit.kv, synthetic_kv(query[:expected_tokens]))


@pytest.mark.parametrize(
    ("query", "expected_tokens"),
    [
        ([1, 2, 3, 4], 4),  # exact
        ([1, 2, 3, 4, 9, 9], 4),  # longer than anything cached
        ([1, 2, 3], 3),  # ends inside a segment
        ([1, 2, 5, 6], 3),  # the branch made by the second insert
        ([1, 2, 7], 2),  # diverges at the split point
        ([1, 9], 1),  # diverges inside the shared segment
        ([7, 8, 9], 2),
        ([9, 1, 2], 0),
        ([], 0),
    ],
)
def test_longest_prefix_match(query: list[int], expected_tokens: int) -> None:
    cache = PrefixCache(max_bytes=1 << 20)
    for prompt in ([1, 2, 3, 4], [1, 2, 5], [7, 8]):
        insert(cache, prompt)
    check_lookup(cache, query, expected_tokens)


def test_max_tokens_caps_the_hit() -> None:
    cache = PrefixCache(max_bytes=1 << 20)
    insert(cache, [1, 2, 3, 4])
    hit = cache.lookup([1, 2, 3, 4], max_tokens=3)
    assert hit.num_tokens == 3
    assert_kv_equal(hit.kv, synthetic_kv([1, 2, 3]))
    assert cache.lookup([1, 2, 3, 4], max_tokens=0).num_tokens == 0


def test_shared_prefix_is_stored_once_and_split() -> None:
    cache = PrefixCache(max_bytes=1 << 20)
    insert(cache, [1, 2, 3, 4])
    assert (cache.stats().num_entries, cache.stats().bytes_held) == (1, 4 * BYTES_PER_TOKEN)
    insert(cache, [1, 2, 5])  # splits [1 2 3 4] into [1 2] + [3 4], adds [5]
    assert (cache.stats().num_entries, cache.stats().bytes_held) == (3, 5 * BYTES_PER_TOKEN)
    insert(cache, [1, 2])  # already cached: nothing changes
    insert(cache, [1, 2, 3])
    assert (cache.stats().num_entries, cache.stats().bytes_held) == (3, 5 * BYTES_PER_TOKEN)


def test_a_popped_frame_returns_to_a_cached_prefix() -> None:
    system, frame, child_frame = [1, 2, 3], [10, 11], [20, 21, 22]
    cache = PrefixCache(max_bytes=1 << 20)
    insert(cache, [*system, *frame, 30])  # menu at the frame
    insert(cache, [*system, *frame, *child_frame, 31])  # pushed a child frame
    check_lookup(cache, [*system, *frame, 32], len(system) + len(frame))  # popped back


def test_byte_bound_evicts_least_recently_used() -> None:
    cache = PrefixCache(max_bytes=10 * BYTES_PER_TOKEN)
    insert(cache, [1, 1, 1, 1])
    insert(cache, [2, 2, 2, 2])
    insert(cache, [3, 3, 3, 3])  # 12 tokens > 10: the oldest, [1 ...], goes
    assert cache.lookup([1, 1, 1, 1]).num_tokens == 0
    assert cache.lookup([2, 2, 2, 2]).num_tokens == 4  # touched: now newer than [3 ...]
    insert(cache, [4, 4, 4, 4])
    assert cache.lookup([3, 3, 3, 3]).num_tokens == 0
    assert cache.lookup([2, 2, 2, 2]).num_tokens == 4
    assert cache.lookup([4, 4, 4, 4]).num_tokens == 4
    stats = cache.stats()
    assert stats.num_evictions == 2
    assert stats.bytes_held == 8 * BYTES_PER_TOKEN <= stats.max_bytes


def test_eviction_takes_leaves_before_their_shared_prefix() -> None:
    cache = PrefixCache(max_bytes=7 * BYTES_PER_TOKEN)
    insert(cache, [1, 2, 3, 4])
    insert(cache, [1, 2, 5, 6])  # [1 2] shared, leaves [3 4] and [5 6]: 6 tokens
    cache.lookup([1, 2, 5, 6])
    insert(cache, [9, 9])  # 8 tokens: evicts the least recent leaf, [3 4]; [1 2] still has a child
    check_lookup(cache, [1, 2, 3, 4], 2)
    check_lookup(cache, [1, 2, 5, 6], 4)
    check_lookup(cache, [9, 9], 2)


def test_a_segment_larger_than_the_bound_is_not_cached() -> None:
    cache = PrefixCache(max_bytes=3 * BYTES_PER_TOKEN)
    insert(cache, [5, 5])
    insert(cache, [1, 2, 3, 4])
    assert cache.lookup([1, 2, 3, 4]).num_tokens == 0
    assert cache.lookup([5, 5]).num_tokens == 2


def test_random_workload_keeps_every_lookup_exact() -> None:
    rng = random.Random(7)
    cache = PrefixCache(max_bytes=40 * BYTES_PER_TOKEN)
    prompts: list[list[int]] = []
    for _ in range(300):
        if prompts and rng.random() < 0.7:  # extend or branch off an earlier prompt
            base = rng.choice(prompts)
            prompt = base[: rng.randint(0, len(base))] + [rng.randint(0, 5) for _ in range(3)]
        else:
            prompt = [rng.randint(0, 5) for _ in range(rng.randint(1, 8))]
        prompts.append(prompt)
        insert(cache, prompt)
        assert cache.stats().bytes_held <= 40 * BYTES_PER_TOKEN
        query = [*rng.choice(prompts), rng.randint(0, 5)]
        hit = cache.lookup(query)
        if hit.num_tokens:
            assert_kv_equal(hit.kv, synthetic_kv(query[: hit.num_tokens]))
    assert cache.stats().num_evictions > 0


def test_concurrent_inserts_and_lookups() -> None:
    cache = PrefixCache(max_bytes=200 * BYTES_PER_TOKEN)
    shared = list(range(100, 130))
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(60):
                prompt = shared[: rng.randint(1, 30)] + [rng.randint(0, 9) for _ in range(5)]
                if rng.random() < 0.5:
                    insert(cache, prompt)
                hit = cache.lookup(prompt)
                if hit.num_tokens:
                    assert_kv_equal(hit.kv, synthetic_kv(prompt[: hit.num_tokens]))
        except BaseException as error:  # collected and asserted on below
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    stats = cache.stats()
    assert stats.num_lookups == 8 * 60
    assert stats.bytes_held <= stats.max_bytes


def test_returned_and_inserted_kv_are_independent_of_the_cache() -> None:
    cache = PrefixCache(max_bytes=1 << 20)
    source: Any = synthetic_kv([1, 2, 3])
    cache.insert([1, 2, 3], source)
    for layer in source.layers:  # the caller keeps using its own cache
        layer.keys.add_(1.0)
    hit = cache.lookup([1, 2, 3])
    for layer in hit.kv.layers:  # and the one it was handed
        layer.keys.mul_(0.0)
    hit.kv.update(torch.ones(1, NUM_KV_HEADS, 1, HEAD_DIM), torch.ones(1, 2, 1, 4), 0)
    check_lookup(cache, [1, 2, 3], 3)


def test_insert_checks_the_kv_length() -> None:
    cache = PrefixCache(max_bytes=1 << 20)
    with pytest.raises(ValueError, match=r"covers 3 positions .* but 2 token ids"):
        cache.insert([1, 2], synthetic_kv([1, 2, 3]))


def test_insert_rejects_a_kv_of_another_layout() -> None:
    cache = PrefixCache(max_bytes=1 << 20)
    insert(cache, [1, 2])
    other_dtype = synthetic_kv([1, 2, 3], dtype=torch.float16)
    with pytest.raises(ValueError, match=r"KV layout"):
        cache.insert([1, 2, 3], other_dtype)


def test_stats_and_clear() -> None:
    cache = PrefixCache(max_bytes=1 << 20)
    insert(cache, [1, 2, 3])
    cache.lookup([1, 2, 9])
    cache.lookup([8])
    stats = cache.stats()
    assert (stats.num_lookups, stats.num_hits, stats.cached_tokens) == (2, 1, 2)
    assert stats.hit_rate == pytest.approx(0.5)
    cache.clear()
    assert (cache.stats().bytes_held, cache.stats().num_entries) == (0, 0)
    assert cache.lookup([1, 2, 3]).num_tokens == 0


def _chatml_prompt_ids(model: LoadedModel, num_tokens: int) -> list[int]:
    """A ChatML prompt of at least `num_tokens` tokens: a catalog-like system text and a task."""
    tools = "\n".join(
        f"- tool_{i}: looks up record {i} in the inventory and returns its fields"
        for i in range(40)
    )
    messages = [
        {"role": "system", "content": f"You route requests to tools.\n{tools}"},
        {"role": "user", "content": "Find the record for item 17 and report its price."},
    ]
    ids = model.tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    assert len(ids) >= num_tokens
    return list(ids)


@pytest.mark.model
def test_cached_prefix_gives_the_same_logits(embedded_model: LoadedModel) -> None:
    model = embedded_model.model
    ids = _chatml_prompt_ids(embedded_model, 300)[-300:]
    prefix_tokens = 250
    with torch.no_grad():
        full_out = model(input_ids=torch.tensor([ids]), use_cache=True, logits_to_keep=1)
    full_logits = full_out.logits[0, -1]  # [vocab]
    keyword = kv_keyword(model)  # `cache` from transformers 5.24, `past_key_values` before
    full_kv = getattr(full_out, keyword)  # the output field has the keyword's name
    # Causal attention: the first positions' KV of the full pass is the prefix's KV, so crop
    # it (crop takes a negative count in transformers 5) instead of a second prefill.
    full_kv.crop(prefix_tokens - len(ids))
    cache = PrefixCache(max_bytes=1 << 30)
    cache.insert(ids[:prefix_tokens], full_kv)
    hit = cache.lookup(ids, max_tokens=len(ids) - 1)
    assert hit.num_tokens == prefix_tokens
    with torch.no_grad():
        rest = torch.tensor([ids[prefix_tokens:]])
        cached_logits = model(
            input_ids=rest, **{keyword: hit.kv}, use_cache=True, logits_to_keep=1
        ).logits[0, -1]
    torch.testing.assert_close(cached_logits, full_logits, atol=1e-4, rtol=1e-4)
    assert int(cached_logits.argmax()) == int(full_logits.argmax())
    assert hit.kv.get_seq_length() == len(ids)  # the forward extended the caller's copy only
    assert cache.lookup(ids).num_tokens == prefix_tokens
