"""The embedded engine's precision on this CPU: `auto` is bfloat16 where the CPU multiplies
bfloat16 natively, float32 elsewhere.

On a CPU with AMX or AVX-512 BF16 units, torch's bfloat16 matmuls run on them: measured on the
2-core development VM (Sapphire Rapids class), a 200-token prefill of SmolLM2-135M took 162 ms
in bfloat16 against 432 ms in float32 on one thread, and a one-token decode step the same
(`bench/results/2026-12-03-cpu-precision-amx`). Without those units torch converts, and
bfloat16 is slower than float32 (the same benchmark's first run, on a host without them: 3.4x
slower prefill). So the choice follows the hardware, not a guess.

>>> native_bf16("flags : fpu sse avx512f avx512_bf16 amx_tile")
True
>>> native_bf16("flags : fpu sse avx2")
False
>>> resolve_dtype("float32")
'float32'
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Final

from stackroute.runtime.errors import InputError

AUTO = "auto"
DEFAULT_DTYPE: Final = "float32"  # the CLI's and the service's (settings.dtype)
DTYPES = ("float32", "bfloat16", "float16")
_NATIVE_BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})
_CPUINFO = Path("/proc/cpuinfo")


def native_bf16(cpuinfo: str) -> bool:
    """Whether a `/proc/cpuinfo` text lists a native bfloat16 matmul unit."""
    for line in cpuinfo.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() == "flags":
            return not _NATIVE_BF16_FLAGS.isdisjoint(value.split())
    return False


@functools.cache
def _this_cpu_has_native_bf16() -> bool:
    try:
        return native_bf16(_CPUINFO.read_text())
    except OSError:  # not Linux: no cpuinfo to read, float32 is the safe choice
        return False


def resolve_dtype(dtype: str) -> str:
    """`dtype` itself, or for `auto` the fastest precision on this CPU."""
    if dtype == AUTO:
        return "bfloat16" if _this_cpu_has_native_bf16() else "float32"
    if dtype not in DTYPES:
        raise InputError(f"dtype must be one of {AUTO}, {', '.join(DTYPES)}; got {dtype!r}")
    return dtype
