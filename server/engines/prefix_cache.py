"""Prefix KV cache shaped like the call stack: a radix tree over token ids.

Each node holds the KV segment of its own tokens only (per layer, keys and values of shape
`[1, kv_heads, seq, head_dim]`), so a prefix shared by many prompts (system text, task, the
frames of the active path) is stored once. A routing prompt extends the previous one, so each
call's prompt is a hit up to its new block; after a pop the parent frame's prefix is still a
node boundary, so a frame is a KV checkpoint.

Bounded by bytes; evicts the least recently used node that has no children, so evicting never
orphans a descendant and every remaining node's prefix stays complete. Thread-safe: one lock
guards the tree, and the large tensor copies (assembling a hit, copying a new segment in) run
outside it. Stored tensors are never written in place, so a reference taken under the lock
stays valid after the tree changes.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CacheHit:
    """The longest cached prefix of a prompt: its length and a fresh, independent KV cache.

    `kv` is a transformers `DynamicCache` covering exactly `num_tokens` positions, or None on a
    miss; the caller owns it and may extend it with a forward pass.
    """

    num_tokens: int
    kv: Any = None


@dataclass(frozen=True)
class PrefixCacheStats:
    """A snapshot of the cache's counters."""

    num_lookups: int
    num_hits: int
    hit_rate: float  # num_hits / num_lookups
    cached_tokens: int  # tokens served from the cache, summed over all lookups
    bytes_held: int
    max_bytes: int
    num_entries: int  # tree nodes (segments) held
    num_evictions: int


@dataclass(eq=False)
class _Node:
    tokens: tuple[int, ...]  # this segment's token ids (the edge label)
    keys: tuple[torch.Tensor, ...]  # per layer, [1, kv_heads, len(tokens), head_dim]
    values: tuple[torch.Tensor, ...]
    parent: _Node | None
    children: dict[int, _Node] = field(default_factory=dict)  # by first token
    last_used: int = 0
    num_bytes: int = 0


@dataclass(frozen=True)
class _Segment:
    """Per-layer key and value tensors for a run of positions."""

    keys: tuple[torch.Tensor, ...]
    values: tuple[torch.Tensor, ...]

    @property
    def layout(self) -> tuple[object, ...]:
        """What must agree between segments that are joined: layers, dtype, heads, head size."""
        first = self.keys[0]
        return (len(self.keys), first.dtype, first.device, first.shape[1], first.shape[3])

    @property
    def num_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))

    def slice(self, start: int, stop: int) -> _Segment:
        """Positions [start, stop) as views: no copy."""
        return _Segment(
            keys=tuple(k[:, :, start:stop, :] for k in self.keys),
            values=tuple(v[:, :, start:stop, :] for v in self.values),
        )

    def compact(self) -> _Segment:
        """Contiguous copies: a view would keep its whole parent storage alive (and uncounted)."""
        import torch

        fmt = torch.contiguous_format
        return _Segment(
            keys=tuple(k.clone(memory_format=fmt) for k in self.keys),
            values=tuple(v.clone(memory_format=fmt) for v in self.values),
        )


class PrefixCache:
    """Longest-prefix KV reuse across requests, bounded by `max_bytes`, LRU over leaves.

    >>> cache = PrefixCache(max_bytes=1 << 20)
    >>> cache.lookup([1, 2, 3]).num_tokens
    0
    """

    def __init__(self, *, max_bytes: int) -> None:
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be positive; got {max_bytes}")
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self._root = _Node(tokens=(), keys=(), values=(), parent=None)
        self._clock = itertools.count(1)  # LRU ticks; a counter, not wall time, so no ties
        self._bytes_held = 0
        self._num_entries = 0
        self._num_lookups = 0
        self._num_hits = 0
        self._cached_tokens = 0
        self._num_evictions = 0
        self._layout: tuple[object, ...] | None = None

    def lookup(self, token_ids: Sequence[int], *, max_tokens: int | None = None) -> CacheHit:
        """The longest cached prefix of `token_ids`, at most `max_tokens` long.

        An engine needs at least one uncached token to get logits, so it passes
        `max_tokens=len(token_ids) - 1`.
        """
        tokens = tuple(int(t) for t in token_ids)  # also accepts a tensor or numpy ids
        limit = len(tokens) if max_tokens is None else max(0, min(max_tokens, len(tokens)))
        with self._lock:
            pieces = self._match(tokens, limit, touch=True)
            num_tokens = sum(stop for _, stop in pieces)
            self._num_lookups += 1
            if num_tokens > 0:
                self._num_hits += 1
                self._cached_tokens += num_tokens
        if num_tokens == 0:
            return CacheHit(num_tokens=0)
        # Outside the lock: the references stay valid (stored tensors are never written to).
        return CacheHit(num_tokens=num_tokens, kv=_assemble([s.slice(0, n) for s, n in pieces]))

    def insert(self, token_ids: Sequence[int], kv: Any) -> None:
        """Store the KV of `token_ids` (a `DynamicCache` covering exactly those positions).

        Only the positions not already cached are copied in; the caller keeps ownership of `kv`.
        """
        tokens = tuple(int(t) for t in token_ids)
        if not tokens:
            return
        segment = _segment_of(kv, len(tokens))
        with self._lock:
            if self._layout is None or not self._root.children:
                self._layout = segment.layout
            elif segment.layout != self._layout:
                # Mixing models or dtypes would hand out a cache that no model can use.
                raise ValueError(f"KV layout {segment.layout} differs from {self._layout}")
            cached = sum(stop for _, stop in self._match(tokens, len(tokens), touch=True))
        if cached == len(tokens):
            return
        new_part = segment.slice(cached, len(tokens))
        if new_part.num_bytes > self._max_bytes:
            logger.debug("not caching a %d-byte segment: over max_bytes", new_part.num_bytes)
            return
        # The copy of the new part runs outside the lock; typically a frame's block or a menu.
        fresh = new_part.compact()
        with self._lock:
            self._attach(tokens, segment, cached, fresh)
            self._evict_to_fit()

    def stats(self) -> PrefixCacheStats:
        """A consistent snapshot of the counters."""
        with self._lock:
            return PrefixCacheStats(
                num_lookups=self._num_lookups,
                num_hits=self._num_hits,
                hit_rate=self._num_hits / self._num_lookups if self._num_lookups else 0.0,
                cached_tokens=self._cached_tokens,
                bytes_held=self._bytes_held,
                max_bytes=self._max_bytes,
                num_entries=self._num_entries,
                num_evictions=self._num_evictions,
            )

    def clear(self) -> None:
        """Drop every entry; the counters are kept."""
        with self._lock:
            self._root.children.clear()
            self._bytes_held = 0
            self._num_entries = 0

    # --- under the lock -------------------------------------------------------------------

    def _match(
        self, token_ids: tuple[int, ...], limit: int, *, touch: bool
    ) -> list[tuple[_Segment, int]]:
        """The nodes along the longest cached prefix (capped at `limit`), each with how many of
        its tokens match; the last one may match only partly."""
        pieces: list[tuple[_Segment, int]] = []
        tick = next(self._clock) if touch else 0
        node, matched = self._root, 0
        while matched < limit:
            child = node.children.get(token_ids[matched])
            if child is None:
                break
            span = min(len(child.tokens), limit - matched)
            common = 0
            while common < span and child.tokens[common] == token_ids[matched + common]:
                common += 1
            pieces.append((_Segment(child.keys, child.values), common))
            if touch:
                child.last_used = tick
            matched += common
            if common < len(child.tokens):
                break
            node = child
        return pieces

    def _attach(
        self, tokens: tuple[int, ...], segment: _Segment, cached: int, fresh: _Segment
    ) -> None:
        """Hang `tokens[cached:]` (KV in `fresh`) below the node path that matches
        `tokens[:cached]`, splitting a node where the match ends inside it."""
        tick = next(self._clock)
        node, matched = self._root, 0
        while matched < len(tokens):
            child = node.children.get(tokens[matched])
            if child is None:
                break
            common = 0
            span = min(len(child.tokens), len(tokens) - matched)
            while common < span and child.tokens[common] == tokens[matched + common]:
                common += 1
            child.last_used = tick
            if common < len(child.tokens):
                child = self._split(child, common)
            node, matched = child, matched + common
        if matched == len(tokens):
            return  # another request stored it meanwhile
        if matched != cached:
            # The tree changed between our two looks (an eviction or a concurrent insert):
            # rare, so copy the right span under the lock rather than retry.
            fresh = segment.slice(matched, len(tokens)).compact()
        self._add_child(node, tokens[matched:], fresh, tick)

    def _split(self, node: _Node, at: int) -> _Node:
        """Cut `node` after `at` tokens; return the new upper part (which keeps the place in the
        tree). Both halves are copied so that neither keeps the other's storage alive."""
        parent = node.parent
        if parent is None:
            raise RuntimeError("cannot split the root")
        whole = _Segment(node.keys, node.values)
        upper_kv, lower_kv = (
            whole.slice(0, at).compact(),
            whole.slice(at, len(node.tokens)).compact(),
        )
        upper = _Node(
            tokens=node.tokens[:at],
            keys=upper_kv.keys,
            values=upper_kv.values,
            parent=parent,
            last_used=node.last_used,
            num_bytes=upper_kv.num_bytes,
        )
        parent.children[upper.tokens[0]] = upper
        node.tokens, node.keys, node.values = node.tokens[at:], lower_kv.keys, lower_kv.values
        node.parent = upper
        self._bytes_held += upper.num_bytes + lower_kv.num_bytes - node.num_bytes
        node.num_bytes = lower_kv.num_bytes
        upper.children[node.tokens[0]] = node
        self._num_entries += 1
        return upper

    def _add_child(self, node: _Node, tokens: tuple[int, ...], kv: _Segment, tick: int) -> None:
        child = _Node(
            tokens=tokens,
            keys=kv.keys,
            values=kv.values,
            parent=node,
            last_used=tick,
            num_bytes=kv.num_bytes,
        )
        node.children[tokens[0]] = child
        self._bytes_held += child.num_bytes
        self._num_entries += 1

    def _evict_to_fit(self) -> None:
        while self._bytes_held > self._max_bytes:
            victim = self._lru_leaf()
            if victim is None or victim.parent is None:
                return
            del victim.parent.children[victim.tokens[0]]
            self._bytes_held -= victim.num_bytes
            self._num_entries -= 1
            self._num_evictions += 1
            logger.debug(
                "evicted a %d-token segment (%d bytes)", len(victim.tokens), victim.num_bytes
            )

    def _lru_leaf(self) -> _Node | None:
        # A full scan: the tree holds hundreds of segments, and eviction is rare next to a
        # forward pass; an ordered index would have to be kept in step with every split.
        best: _Node | None = None
        stack = list(self._root.children.values())
        while stack:
            node = stack.pop()
            if node.children:
                stack.extend(node.children.values())
            elif best is None or node.last_used < best.last_used:
                best = node
        return best


def _segment_of(kv: Any, num_tokens: int) -> _Segment:
    """Views of a `DynamicCache`'s tensors, checked to be full-attention and `num_tokens` long."""
    layers = list(kv.layers)
    if not layers:
        raise ValueError("the KV cache has no layers")
    keys, values = [], []
    for index, layer in enumerate(layers):
        if getattr(layer, "is_sliding", False) or not hasattr(layer, "keys"):
            # A sliding-window layer keeps only its last window: its positions cannot be cut
            # into prefix segments.
            raise ValueError(f"layer {index} ({type(layer).__name__}) is not full attention")
        if layer.keys is None or layer.keys.dim() != 4 or layer.keys.shape[0] != 1:
            raise ValueError(f"layer {index} is empty or not batch 1")
        if layer.keys.shape[-2] != num_tokens or layer.values.shape[-2] != num_tokens:
            raise ValueError(
                f"the KV cache covers {layer.keys.shape[-2]} positions in layer {index}, "
                f"but {num_tokens} token ids were given"
            )
        keys.append(layer.keys)
        values.append(layer.values)
    return _Segment(keys=tuple(keys), values=tuple(values))


def _assemble(pieces: list[_Segment]) -> Any:
    """One fresh `DynamicCache` from consecutive segments (new tensors, nothing shared).

    The `DynamicCache` constructor copies what it is given (it concatenates onto an empty
    tensor), so a single segment goes in as a view and is copied once; several are
    concatenated first (a second copy, about 5 ms per 1,000 float32 tokens of this model).
    """
    import torch
    from transformers import DynamicCache

    per_layer = [
        (
            _joined([p.keys[layer] for p in pieces], torch),
            _joined([p.values[layer] for p in pieces], torch),
        )
        for layer in range(len(pieces[0].keys))
    ]
    kv: Any = DynamicCache(per_layer)
    for (keys, values), built in zip(per_layer, kv.layers, strict=True):
        # Should a transformers release keep the given tensors instead, copy them here: a
        # caller's in-place write must never reach the cache.
        if built.keys.data_ptr() == keys.data_ptr() or built.values.data_ptr() == values.data_ptr():
            built.keys, built.values = built.keys.clone(), built.values.clone()
    return kv


def _joined(tensors: list[torch.Tensor], torch: Any) -> torch.Tensor:
    return tensors[0] if len(tensors) == 1 else torch.cat(tensors, dim=-2)
