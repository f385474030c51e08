"""The vLLM engine's options, its typed errors, and the process-wide batch-invariance switch
(`vllm_engine.py` re-exports them). Nothing here imports vLLM."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from enum import StrEnum

from stackroute.grammars.string_caps import DEFAULT_MAX_STRING_CHARS
from stackroute.runtime.errors import InputError
from stackroute.server.engines.base import EngineError


class MenuMode(StrEnum):
    SCORE = "score"  # logprob_token_ids over the canonical trie: exact, one or two requests
    CONSTRAINED = "constrained"  # structured_outputs choice + post-mask logprobs: estimated


class VllmNotInstalledError(InputError, EngineError):
    """`--engine vllm` where vLLM is not installed (the operator's choice to fix)."""

    code = "engine_unavailable"
    http_status = 400


class VllmRequestError(InputError, EngineError):
    """vLLM refused a request for its content (an invalid schema or regex, say)."""

    code = "invalid_constraint"
    http_status = 400


@dataclass(frozen=True, kw_only=True)
class VllmOptions:
    dtype: str = "auto"  # the checkpoint's dtype (bf16 for most); CPU needs "bfloat16"
    max_model_len: int | None = None  # None: the model's own
    max_num_seqs: int = 64  # sequences per batch
    # None: $STACKROUTE_VLLM_GPU_MEMORY_UTILIZATION, else 0.85 (two engines on one GPU: 0.4)
    gpu_memory_utilization: float | None = None
    enforce_eager: bool = False  # skip CUDA graphs / torch.compile: faster start, slower calls
    is_batch_invariant: bool = False
    seed: int = 0
    menu_mode: MenuMode = MenuMode.SCORE
    top_logprobs: int = 20  # constrained mode's top-k (vLLM's max_logprobs default)
    request_timeout_s: float = 600.0
    max_string_chars: int | None = DEFAULT_MAX_STRING_CHARS  # grammars/string_caps.py


def _set_batch_invariance(is_enabled: bool) -> None:
    """vLLM reads VLLM_BATCH_INVARIANT when it is imported, process-wide."""
    current = os.environ.get("VLLM_BATCH_INVARIANT", "0") not in ("", "0")
    if is_enabled == current:
        return
    if "vllm" in sys.modules:
        raise InputError("batch invariance must be chosen before vLLM is imported: set "
                         f"VLLM_BATCH_INVARIANT={int(is_enabled)} at process start")
    os.environ["VLLM_BATCH_INVARIANT"] = "1" if is_enabled else "0"
