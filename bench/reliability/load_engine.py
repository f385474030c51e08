"""The embedded CPU engine with a prefix cache capped at `$STACKROUTE_LOAD_CACHE_BYTES`, for
the load test: `--engine stackroute.bench.reliability.load_engine:create`.

The served engine's cache cap (1 GiB) is not a setting, and a short load run on a 135M model
never fills it; a small cap shows that the cache stays under it by evicting. The engine is the
real `TransformersEngine` in every other way.
"""

from __future__ import annotations

import os
from typing import Any

from stackroute.server.engines.registry import create_engine
from stackroute.server.engines.transformers_engine import DEFAULT_CACHE_BYTES

CACHE_BYTES_ENV = "STACKROUTE_LOAD_CACHE_BYTES"


def create(*, model: str | None = None, **options: Any) -> Any:
    cache_bytes = int(os.environ.get(CACHE_BYTES_ENV, DEFAULT_CACHE_BYTES))
    return create_engine("transformers", model=model, cache_bytes=cache_bytes)
