"""The embedded engine's precision on this CPU: `auto` is bfloat16 where the CPU multiplies
bfloat16 natively, float32 elsewhere.

On a CPU with AMX or AVX-512 BF16 units, torch's bfloat16 matmuls run on them. On the 2-core
development VM that has them (its flags list amx_bf16), a 200-token prefill of SmolLM2-135M
took 427 ms in bfloat16 against 1,018 ms in float32 on one thread at load 3-5, and a one-token
decode step the same (`bench/results/2026-12-03-cpu-threads-loaded`); routing calls through
the engine 437 vs 991 ms p50 (`2026-12-03-cpu-peers-bf16`). An earlier run on a VM of the same
name but, by the numbers, without those units measured bfloat16 3.4x slower in prefill
(`2026-12-03-cpu-precision`): torch converts there. So the choice follows the CPU's flags.

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
# The embedded engine's default everywhere (the CLI, the service's `dtype` setting, the
# engine class): decisions identical to float32's (32/32 routing calls, bench peers), about
# 2x faster; greedy argument text differed in 11 of 40 cases and scored 9 vs 11 of 40 exact
# against gold (bench/results/2026-12-03-cpu-precision-args). `--dtype float32` keeps those.
DEFAULT_DTYPE: Final = "auto"
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
