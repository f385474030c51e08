"""Usage figures of model calls: tokens, passes and latency, with units in the names."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Usage:
    """What one or more model calls cost. Add two with `+`."""

    model_calls: int = 0
    prompt_tokens: int = 0  # tokens in the prompts (prefilled + served from the cache)
    prefill_tokens: int = 0  # tokens the model actually ran over
    cached_tokens: int = 0  # prompt tokens served from the prefix cache
    generated_tokens: int = 0  # answer tokens (forced + sampled)
    forward_passes: int = 0  # model forward calls
    speculated_levels: int = 0
    accepted_levels: int = 0
    latency_ms: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(**{f.name: getattr(self, f.name) + getattr(other, f.name)
                        for f in fields(self)})

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["latency_ms"] = round(self.latency_ms, 3)
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Usage:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
